// Training curves as an SVG file: loss and Dice per optimizer step, two
// stacked panels with their own axes (the Dice panel also draws the
// validation Dice, `val_dice`, at the steps that have it, as points joined
// by a dashed line), written into the run folder at the end
// of every run (pipeline and --single-process alike).
//
// Torch-free and dependency-free: the SVG is plain text any browser shows.
// Its points are a run's steps (common/run/metrics_format.h reads them
// from metrics.jsonl; a non-finite value leaves a gap in its curve).
// Nothing here holds state; every function is thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace up {

// The file name of the plot inside a run folder.
constexpr const char* kCurvesFile = "curves.svg";

// One step of the curves.
struct MetricsPoint {
  int64_t step = 0;
  double loss = 0;                                             // NaN when the line held null
  double dice = 0;                                             // NaN when the line held null
  double val_dice = std::numeric_limits<double>::quiet_NaN();  // NaN: no validation at this step
};

// Axis ticks: `count`-ish round values (1, 2 or 5 times a power of ten)
// covering [lo, hi], first <= lo and last >= hi. lo == hi gets a unit span.
std::vector<double> NiceTicks(double lo, double hi, int count);

// The SVG document: "loss" panel above, "Dice" panel (0..1) below, step on
// the x axis. Points with a non-finite value split their curve. An empty
// series gives a document that says "no steps recorded".
std::string TrainingCurvesSvg(const std::vector<MetricsPoint>& points, const std::string& title);

}  // namespace up
