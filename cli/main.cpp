// fusetune: the command-line entry point. Each subcommand lives in its own
// cmd_*.cpp; this file only wires them together and maps failures to exit
// codes (0 ok, 1 internal error, 2 bad input or usage).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/log.h"

int main(int argc, char** argv) {
  using namespace fusetune;
  CLI::App app{"fusetune: search-based autotuning of operator fusion and tiling"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fusetune " FUSETUNE_VERSION);
  std::string log_level;
  app.add_option("--log-level", log_level, "debug, info, warn (default), error or off");
  int exit_code = cli::kExitOk;
  auto set_result = [&exit_code](int code) { exit_code = code; };
  cli::AddInspectCommand(app, set_result);
  cli::AddRunReferenceCommand(app, set_result);
  cli::AddSpaceCommand(app, set_result);
  cli::AddRunCommand(app, set_result);
  cli::AddCalibrateCommand(app, set_result);
  cli::AddMeasureCommand(app, set_result);
  cli::AddDbCommand(app, set_result);
  cli::AddCollectCommand(app, set_result);
  cli::AddRetrainCommand(app, set_result);
  cli::AddEvaluateModelCommand(app, set_result);
  cli::AddEvaluateTransferCommand(app, set_result);
  cli::AddTuneCommand(app, set_result);
  cli::AddClusterCommand(app, set_result);
  cli::AddReportCommand(app, set_result);
  cli::AddCompileCommand(app, set_result);
  app.parse_complete_callback([&] {
    LogLevel level;
    if (!log_level.empty()) {
      if (!ParseLogLevel(log_level, &level))
        throw CLI::ValidationError("--log-level", "unknown level '" + log_level + "'");
      SetLogLevel(level);
    }
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : cli::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fusetune: internal error: %s\n", e.what());
    return cli::kExitInternal;
  }
  return exit_code;
}
