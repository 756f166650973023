# FindXGBoost: Debian's libxgboost-dev ships a CMake config whose targets
# reference /usr/bin/xgboost (from the separate 'xgboost' CLI package), so
# find_package(xgboost CONFIG) fails without it. This module finds the C API
# header and library directly and defines XGBoost::XGBoost.
find_path(XGBoost_INCLUDE_DIR NAMES xgboost/c_api.h)
find_library(XGBoost_LIBRARY NAMES xgboost)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(XGBoost REQUIRED_VARS XGBoost_LIBRARY XGBoost_INCLUDE_DIR)
if(XGBoost_FOUND AND NOT TARGET XGBoost::XGBoost)
  add_library(XGBoost::XGBoost SHARED IMPORTED)
  set_target_properties(XGBoost::XGBoost PROPERTIES
    IMPORTED_LOCATION "${XGBoost_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${XGBoost_INCLUDE_DIR}")
endif()
mark_as_advanced(XGBoost_INCLUDE_DIR XGBoost_LIBRARY)
