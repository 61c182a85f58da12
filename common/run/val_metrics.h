// Validation Dice as nnU-Net reports it: per case, per foreground class
// (and, for BraTS labels, per region), Dice = 2TP / (2TP + FP + FN), NaN
// when the class is in neither the reference nor the prediction; each
// class's score is the mean over the cases where it is a number, and the
// run's `val_dice` the mean of the classes' scores (nnU-Net's
// "foreground_mean"). The regions are the BraTS challenge's: whole tumour
// (labels 1, 2, 4), tumour core (1, 4), enhancing tumour (4).
//
// Torch-free: a case's prediction arrives as counts, laid out as
// ValidationEntries says, three integers (TP, FP, FN) per entry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up {

// One entry a case is counted for: a class, or a union of classes.
struct ValidationEntry {
  std::string key;               // "1" .. "K-1" for classes, "wt", "tc", "et" for regions
  std::vector<int64_t> classes;  // the classes that make it up
  bool region = false;           // a union (not part of the mean)
};

// Classes 1..num_classes-1, then (with `brats_regions`, classes being BraTS
// labels 0, 1, 2, 4 in that order) the three regions.
std::vector<ValidationEntry> ValidationEntries(int num_classes, bool brats_regions);

// Region-based training (model.regions): region r as entry "r<r+1>", made of
// its classes, each part of the mean.
std::vector<ValidationEntry> RegionEntries(const std::vector<std::vector<int>>& regions);

struct ValidationScores {
  double mean = 0;                // val_dice: the mean over the classes' scores
  std::vector<double> per_entry;  // ValidationEntries' order; NaN where no case counts
  int64_t cases = 0;
};

// `counts`: per case, 3 * entries integers (TP, FP, FN per entry).
// std::invalid_argument when a case has another length.
ValidationScores ScoreValidation(const std::vector<std::vector<int64_t>>& counts,
                                 const std::vector<ValidationEntry>& entries);

// Keeps the best mean validation Dice and the step it came at.
struct BestValidation {
  double dice = -1;
  int64_t step = 0;
  // Whether `scores` beat the best so far (a NaN mean never does).
  bool Offer(const ValidationScores& scores, int64_t step);
};

// The best so far of the run in `run_dir`, for a resumed run: the step of
// its checkpoints/best (from the manifest) and that step's val_dice in
// metrics.jsonl; none (dice -1) when either is missing or unreadable.
BestValidation RecallBestValidation(const std::string& run_dir);

}  // namespace up
