// The fusetune subcommands. Each Add*Command registers a CLI11 subcommand
// whose callback reports its exit code through `set_result`.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace fusetune::cli {

void AddInspectCommand(CLI::App& app, std::function<void(int)> set_result);
void AddRunReferenceCommand(CLI::App& app, std::function<void(int)> set_result);
void AddSpaceCommand(CLI::App& app, std::function<void(int)> set_result);
void AddRunCommand(CLI::App& app, std::function<void(int)> set_result);
void AddCalibrateCommand(CLI::App& app, std::function<void(int)> set_result);
void AddMeasureCommand(CLI::App& app, std::function<void(int)> set_result);
void AddDbCommand(CLI::App& app, std::function<void(int)> set_result);
void AddCollectCommand(CLI::App& app, std::function<void(int)> set_result);
void AddRetrainCommand(CLI::App& app, std::function<void(int)> set_result);
void AddEvaluateModelCommand(CLI::App& app, std::function<void(int)> set_result);
void AddEvaluateTransferCommand(CLI::App& app, std::function<void(int)> set_result);
void AddTuneCommand(CLI::App& app, std::function<void(int)> set_result);
void AddClusterCommand(CLI::App& app, std::function<void(int)> set_result);
void AddReportCommand(CLI::App& app, std::function<void(int)> set_result);
void AddCompileCommand(CLI::App& app, std::function<void(int)> set_result);

}  // namespace fusetune::cli
