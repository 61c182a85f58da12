#!/usr/bin/env python3
"""Trains nnU-Net's own nnUNetTrainer (nnunetv2, on the CPU) for a few steps
on the batches unet-pipeline trained on, from the weights it started from,
and compares losses and weights with unet-pipeline's run.

    nnunet_trainer_parity.py --preprocessed DIR --dataset Dataset001_Sample \\
        --configuration 3d_fullres --fold 0 --init init.pt --batches batches.pt \\
        --steps 5 --steps-per-epoch 2 --ours final.pt --our-losses 1.0,0.9,... [--tolerance 1e-5]

init.pt and final.pt are `unet-pipeline export` state dicts (--initial for
the start); batches.pt is `unet-pipeline batches` (images-sS-mM, masks-sS-mM).
The trainer is nnUNetTrainer itself: its network, loss (Dice + CE with deep
supervision, targets downsampled by its DownsampleSegForDSTransform), SGD,
PolyLRScheduler stepped at each epoch's start (on_train_epoch_start does
so) and train_step (gradient clipping at 12). The epochs are set so the
poly schedule spans the same steps as unet-pipeline's. Prints one line per
step and per mismatch; exits 1 on any difference beyond the tolerance
(relative to the tensor's largest magnitude, and to the loss).
"""
import argparse
import math
import os
import sys
import tempfile


def main():
    p = argparse.ArgumentParser()
    for a in ("--preprocessed", "--dataset", "--configuration", "--fold", "--init", "--batches",
              "--ours", "--our-losses"):
        p.add_argument(a, required=True)
    p.add_argument("--plans", default="nnUNetPlans")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--steps-per-epoch", type=int, required=True)
    p.add_argument("--tolerance", type=float, default=1e-5)
    a = p.parse_args()

    os.environ["nnUNet_preprocessed"] = a.preprocessed
    os.environ.setdefault("nnUNet_raw", tempfile.mkdtemp())
    os.environ["nnUNet_results"] = tempfile.mkdtemp()
    import torch
    from batchgenerators.utilities.file_and_folder_operations import load_json
    from batchgeneratorsv2.transforms.utils.deep_supervision_downsampling import \
        DownsampleSegForDSTransform
    from batchgeneratorsv2.transforms.utils.seg_to_regions import \
        ConvertSegmentationToRegionsTransform
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer

    torch.set_num_threads(1)
    folder = os.path.join(a.preprocessed, a.dataset)
    plans = load_json(os.path.join(folder, a.plans + ".json"))
    dataset_json = load_json(os.path.join(folder, "dataset.json"))
    plans["continue_training"] = False  # as nnunetv2.run.run_training sets it
    fold = a.fold if a.fold == "all" else int(a.fold)
    t = nnUNetTrainer(plans, a.configuration, fold, dataset_json, device=torch.device("cpu"))
    t.num_iterations_per_epoch = a.steps_per_epoch
    t.num_epochs = math.ceil(a.steps / a.steps_per_epoch)
    t.initialize()
    t.network.load_state_dict(torch.load(a.init, weights_only=True), strict=True)
    t.network.train()

    batches = torch.load(a.batches, weights_only=True)
    down = DownsampleSegForDSTransform(ds_scales=t._get_deep_supervision_scales())
    labels = t.label_manager
    # Region-based: the segmentation becomes region maps before the
    # downsampling, as in nnUNetTrainer's training transforms.
    to_regions = ConvertSegmentationToRegionsTransform(labels.foreground_regions, channel_in_seg=0) \
        if labels.has_regions else None
    ours = [float(v) for v in a.our_losses.split(",")]
    failed = False
    for s in range(a.steps):
        if s % a.steps_per_epoch == 0:
            t.lr_scheduler.step(s // a.steps_per_epoch)  # on_train_epoch_start
        m = 0
        images, masks = [], []
        while "images-s%d-m%d" % (s, m) in batches:
            images.append(batches["images-s%d-m%d" % (s, m)])
            masks.append(batches["masks-s%d-m%d" % (s, m)])
            m += 1
        data = torch.cat(images)  # (B, C, *S)
        seg = torch.cat(masks)[:, None].to(torch.int16)  # (B, 1, *S), as nnU-Net's loader
        per_sample = []
        for i in range(seg.shape[0]):
            one = seg[i] if to_regions is None else to_regions(segmentation=seg[i])["segmentation"]
            per_sample.append(down(segmentation=one)["segmentation"])
        target = [torch.stack([ps[k] for ps in per_sample]) for k in range(len(per_sample[0]))]
        loss = float(t.train_step({"data": data, "target": target})["loss"])
        lr = t.optimizer.param_groups[0]["lr"]
        diff = abs(loss - ours[s]) / max(abs(loss), 1e-12)
        print("step %d: nnUNetTrainer loss %.7f lr %.6g, unet-pipeline %.7f (relative %.2e)"
              % (s + 1, loss, lr, ours[s], diff))
        failed |= diff > a.tolerance

    theirs = t.network.state_dict()
    mine = torch.load(a.ours, weights_only=True)
    if set(theirs) != set(mine):
        print("MISMATCH keys: only nnU-Net %s, only ours %s"
              % (sorted(set(theirs) - set(mine))[:5], sorted(set(mine) - set(theirs))[:5]))
        sys.exit(1)
    worst, worst_key = 0.0, ""
    for k, v in theirs.items():
        if not v.is_floating_point():
            continue
        scale = max(v.abs().max().item(), 1e-12)
        d = (v - mine[k]).abs().max().item() / scale
        if d > worst:
            worst, worst_key = d, k
        if d > a.tolerance:
            print("MISMATCH %s: relative %.3e" % (k, d))
            failed = True
    print("weights: %d tensors, largest relative difference %.3e (%s)"
          % (len(theirs), worst, worst_key))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
