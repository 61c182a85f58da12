// The subcommands of `unet-pipeline`, each in its own file; cli.cpp dispatches.
// Each returns the exit code and throws up::Error for bad input.
#pragma once

namespace up {

int PlanCommand(int argc, char** argv);  // plan_command.cpp

}  // namespace up
