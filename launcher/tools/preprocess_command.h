// `unet-pipeline preprocess --input RAW --out CACHE [--config C] [--set K=V]`:
// turns a raw dataset (BraTS folders or nnU-Net's raw layout,
// common/data/raw_dataset.h) into the cache `data.kind: cache` trains from
// (common/data/case_cache.h). Cases already cached from the same inputs are
// left alone; a damaged one is named and rebuilt. With --config, the
// dataset's channels and classes are checked against the model first.
// Progress on a terminal; one summary line at the end.
#pragma once

namespace up {

int PreprocessCommand(int argc, char** argv);

}  // namespace up
