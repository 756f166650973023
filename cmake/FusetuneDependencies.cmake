# Finds every third-party dependency as an imported target. A missing one
# stops configuration with the Debian package that provides it
# (scripts/setup.sh installs them all).

macro(fusetune_require package debian_package)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR
      "fusetune: dependency '${package}' not found. Install the Debian package "
      "'${debian_package}' (sudo apt-get install ${debian_package}) or run scripts/setup.sh.")
  endif()
endmacro()

fusetune_require(Eigen3 libeigen3-dev NO_MODULE)
fusetune_require(TBB libtbb-dev)
fusetune_require(SQLite3 libsqlite3-dev)
find_package(Threads REQUIRED)  # SQLiteCpp's config links it
fusetune_require(SQLiteCpp libsqlitecpp-dev)
fusetune_require(Protobuf "libprotobuf-dev protobuf-compiler")
fusetune_require(ONNX libonnx-dev)
fusetune_require(nlohmann_json nlohmann-json3-dev)
fusetune_require(CLI11 libcli11-dev)
fusetune_require(fmt libfmt-dev)
fusetune_require(XGBoost libxgboost-dev MODULE)
if(FUSETUNE_BUILD_TESTS)
  fusetune_require(GTest libgtest-dev)
endif()
if(FUSETUNE_BUILD_BENCH)
  fusetune_require(benchmark libbenchmark-dev)
endif()

# The python interpreter with torch and onnx (Debian's python3-torch,
# python3-onnx) generates the exported test models at build time.
find_program(FUSETUNE_SYSTEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
