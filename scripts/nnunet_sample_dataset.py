#!/usr/bin/env python3
"""A small CT-like dataset in nnU-Net v2's raw layout, for trying and testing
the nnU-Net workflow (`data.kind: nnunet`) without downloading anything.

    nnunet_sample_dataset.py RAW [--id 1] [--name Sample] [--cases 6] [--seed 0]

writes RAW/DatasetNNN_Name/{dataset.json, imagesTr/CASE_0000.nii.gz, labelsTr/CASE.nii.gz}:
one channel named "CT" (so nnU-Net's planner picks CTNormalization), voxels
of 0.8 x 0.8 x 3 mm (anisotropic, so preprocessing resamples and transposes),
intensities in Hounsfield-like units (air -1000, soft tissue around 40, an
"organ" (label 1) around 120 and a "lesion" inside it (label 2) around 220,
with noise). Case i depends on (seed, i) alone. With --regions, dataset.json
names regions as nnU-Net's BraTS datasets do: "organ" is labels 1 and 2
(the lesion inside it counts), "lesion" label 2, painted in that order.
"""
import argparse
import json
import os

import nibabel
import numpy as np


def make_case(rng, shape_xyz):
    x, y, z = np.meshgrid(*[np.arange(n, dtype=np.float32) for n in shape_xyz], indexing="ij")
    # Millimetres from the volume's centre (0.8 x 0.8 x 3 mm voxels).
    spacing = (0.8, 0.8, 3.0)
    mm = [(a - (n - 1) / 2) * s for a, n, s in zip((x, y, z), shape_xyz, spacing)]
    body = (mm[0] / 15.0) ** 2 + (mm[1] / 13.0) ** 2 + (mm[2] / 40.0) ** 2 <= 1.0
    centre = rng.uniform(-4, 4, size=3) * np.array([1.0, 1.0, 2.0])
    radii = rng.uniform(5.0, 7.0, size=3) * np.array([1.0, 1.0, 2.5])
    organ = sum(((m - c) / r) ** 2 for m, c, r in zip(mm, centre, radii)) <= 1.0
    lesion_c = centre + rng.uniform(-1.5, 1.5, size=3)
    lesion = sum(((m - c) / r) ** 2 for m, c, r in zip(mm, lesion_c, radii * 0.4)) <= 1.0
    lesion &= organ
    image = np.full(shape_xyz, -1000.0, dtype=np.float32)
    image[body] = 40.0
    image[organ] = 120.0
    image[lesion] = 220.0
    image += rng.normal(0.0, 15.0, size=shape_xyz).astype(np.float32)
    labels = np.zeros(shape_xyz, dtype=np.uint8)
    labels[organ & body] = 1
    labels[lesion & body] = 2
    return image, labels


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("raw", help="nnUNet_raw: the dataset folder is made inside it")
    p.add_argument("--id", type=int, default=1)
    p.add_argument("--name", default="Sample")
    p.add_argument("--cases", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--regions", action="store_true", help="region-based labels in dataset.json")
    a = p.parse_args()
    folder = os.path.join(a.raw, "Dataset%03d_%s" % (a.id, a.name))
    for sub in ("imagesTr", "labelsTr"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    affine = np.diag([0.8, 0.8, 3.0, 1.0])
    for i in range(a.cases):
        rng = np.random.default_rng([a.seed, i])
        shape = (40 + 2 * (i % 3), 36 + 2 * (i % 2), 12 + (i % 2))  # x, y, z
        image, labels = make_case(rng, shape)
        name = "case_%03d" % i
        nibabel.save(nibabel.Nifti1Image(image, affine),
                     os.path.join(folder, "imagesTr", name + "_0000.nii.gz"))
        nibabel.save(nibabel.Nifti1Image(labels, affine),
                     os.path.join(folder, "labelsTr", name + ".nii.gz"))
    dataset = {
        "channel_names": {"0": "CT"},
        "labels": ({"background": 0, "organ": [1, 2], "lesion": 2} if a.regions
                   else {"background": 0, "organ": 1, "lesion": 2}),
        "numTraining": a.cases,
        "file_ending": ".nii.gz",
    }
    if a.regions:
        dataset["regions_class_order"] = [1, 2]
    with open(os.path.join(folder, "dataset.json"), "w") as f:
        json.dump(dataset, f, indent=2)
    print(folder)


if __name__ == "__main__":
    main()
