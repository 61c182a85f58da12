#!/usr/bin/env python3
"""Converts nnU-Net v2's preprocessed cases into unet-pipeline's cache, with
nnU-Net's own dataset classes (so .b2nd, the older .npz and whatever nnunetv2
reads next are read as nnU-Net reads them).

    nnunet_import.py REQUEST.json

The launcher (common/nnunet/nnunet_import.h) writes the request and runs this
only when something is missing or stale:

    {"data_dir": ".../nnUNetPlans_3d_fullres", "cache": "...unet-pipeline",
     "cases": [{"name": "case_000", "stamp": "<hex>"}, ...],   # to (re)convert
     "all_cases": [...], "channel_names": [...], "label_names": [...],
     "regions": [[1, 2, 3], [2, 3], [3]] or null,   # dataset.json's, when region-based
     "splits_file": ".../splits_final.json" or null}

Per case it writes CACHE/<case>/image.npy ((C, D, H, W) float32, the
preprocessed data as nnU-Net trains on it), labels.npy ((D, H, W) uint8:
nnU-Net's -1 outside the non-zero region becomes 0, as its trainer's
RemoveLabelTansform does) and, last, case.json (common/data/case_cache.h's
format: the arrays' SHA-256, the stamp the launcher gave, the class locations
of the .pkl as flat voxel indices; for a region-based dataset, whose .pkl
keys them by region, under each region's 1-based index). With splits_file it writes nnU-Net's
5-fold split there when absent (generate_crossval_split, seed 12345), as
nnUNetTrainer.do_split does. Exits non-zero with one line on stderr when
something is wrong.
"""
import hashlib
import json
import os
import sys
import time


def atomic_write(path, write):
    tmp = path + ".tmp%d" % os.getpid()
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_json(path, value):
    atomic_write(path, lambda f: f.write((json.dumps(value) + "\n").encode()))


def location_key(label, regions):
    """The cache's key of a .pkl class_locations entry: the label itself, or
    with regions the 1-based index of the region with those labels."""
    if regions is None:
        return None if isinstance(label, (tuple, list)) else int(label)
    members = set(int(v) for v in label) if isinstance(label, (tuple, list)) else {int(label)}
    for r, region in enumerate(regions):
        if set(region) == members:
            return r + 1
    return None


def convert(np, dataset, name, stamp, cache, num_classes, regions):
    data, seg, _, props = dataset.load_case(name)
    image = np.ascontiguousarray(np.asarray(data[:], dtype=np.float32))  # (C, D, H, W)
    labels = np.asarray(seg[:])
    if labels.ndim != 4 or labels.shape[0] != 1 or image.ndim != 4:
        raise ValueError("case %s: data %s and seg %s are not (C, D, H, W) and (1, D, H, W); "
                         "is it a 3-D configuration?" % (name, image.shape, labels.shape))
    labels = labels[0]
    bad = (labels < -1) | (labels >= num_classes)
    if bad.any():
        raise ValueError("case %s: its segmentation holds label %d; dataset.json has labels 0..%d"
                         % (name, int(labels[bad].flat[0]), num_classes - 1))
    labels = np.ascontiguousarray(np.where(labels < 0, 0, labels).astype(np.uint8))
    shape = list(labels.shape)
    folder = os.path.join(cache, name)
    os.makedirs(folder, exist_ok=True)
    meta_path = os.path.join(folder, "case.json")
    if os.path.exists(meta_path):
        os.remove(meta_path)  # incomplete until the new one is written
    for file, array in (("image.npy", image), ("labels.npy", labels)):
        atomic_write(os.path.join(folder, file), lambda f, a=array: np.save(f, a))
    # nnU-Net's class locations: rows (channel, z, y, x) -> flat indices.
    locations = {}
    for label, rows in props.get("class_locations", {}).items():
        key = location_key(label, regions)
        if key is None or len(rows) == 0:
            continue
        rows = np.asarray(rows, dtype=np.int64)
        flat = (rows[:, 1] * shape[1] + rows[:, 2]) * shape[2] + rows[:, 3]
        locations[str(key)] = [int(v) for v in flat]
    spacing = [float(s) for s in props.get("spacing", [1.0, 1.0, 1.0])][::-1]  # x, y, z
    meta = {
        "format": "unet-pipeline-cache", "version": 2, "name": name,
        "channels": int(image.shape[0]), "shape": shape, "original_shape": shape,
        "crop_begin": [0, 0, 0], "spacing": spacing, "qform_code": 0, "sform_code": 0,
        "quatern": [0.0, 0.0, 0.0], "qoffset": [0.0, 0.0, 0.0], "qfac": 1.0,
        "srow": [[spacing[0], 0.0, 0.0, 0.0], [0.0, spacing[1], 0.0, 0.0],
                 [0.0, 0.0, spacing[2], 0.0]],
        "source_stamp": stamp,
        "image_sha256": sha256(os.path.join(folder, "image.npy")),
        "labels_sha256": sha256(os.path.join(folder, "labels.npy")),
        "class_locations": locations,
    }
    write_json(meta_path, meta)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: nnunet_import.py REQUEST.json")
    with open(sys.argv[1]) as f:
        req = json.load(f)
    try:
        import numpy as np
        from nnunetv2.training.dataloading.nnunet_dataset import infer_dataset_class
        from nnunetv2.utilities.crossval_split import generate_crossval_split
    except ImportError as e:
        sys.exit("cannot import nnunetv2 (%s) with %s; install nnunetv2 into it "
                 "(pip install nnunetv2) or set UP_PYTHON to a Python that has it"
                 % (e, sys.executable))
    data_dir, cache = req["data_dir"], req["cache"]
    os.makedirs(cache, exist_ok=True)
    start = time.time()
    if req["cases"]:
        dataset = infer_dataset_class(data_dir)(data_dir, identifiers=[c["name"] for c in req["cases"]])
        for c in req["cases"]:
            convert(np, dataset, c["name"], c["stamp"], cache, len(req["label_names"]),
                    req.get("regions"))
    index = {
        "format": "unet-pipeline-cache", "version": 2, "layout": "nnunet",
        "channel_names": req["channel_names"], "class_names": req["label_names"],
        "label_values": list(range(len(req["label_names"]))), "cases": sorted(req["all_cases"]),
    }
    write_json(os.path.join(cache, "cache.json"), index)
    splits = req.get("splits_file")
    if splits and not os.path.exists(splits):
        folds = generate_crossval_split(sorted(req["all_cases"]), seed=12345, n_splits=5)
        write_json(splits, folds)
        print("wrote nnU-Net's 5-fold split to %s" % splits)
    print("converted %d case(s) in %.1f s" % (len(req["cases"]), time.time() - start))


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:  # one line for the launcher's error
        sys.exit("%s: %s" % (type(e).__name__, e))
