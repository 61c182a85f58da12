#!/usr/bin/env python3
"""Writes a fold's validation/ folder in nnUNet_results as nnUNetTrainer does
at the end of its training (perform_actual_validation), for a fold that
unet-pipeline trained and filed there (common/nnunet/nnunet_validation.h):
nnU-Net's own predictor, loaded from the fold's checkpoint_final.pth,
predicts each held-out case of the preprocessed dataset (sliding window, step
0.5, Gaussian weights, mirroring along the checkpoint's axes), nnU-Net's
export_prediction_from_logits writes it in the case's original geometry, and
compute_metrics_on_folder scores the folder against gt_segmentations into
summary.json. nnUNetv2_find_best_configuration reads what this writes.

    nnunet_validate.py REQUEST.json

    {"model_folder": ".../nnUNetTrainerUnetPipeline__nnUNetPlans__3d_fullres",
     "fold": 0, "data_dir": ".../Dataset001_X/nnUNetPlans_3d_fullres",
     "gt_folder": ".../Dataset001_X/gt_segmentations",
     "splits_file": ".../splits_final.json", "output": ".../fold_0/validation.new",
     "device": "cpu" | "cuda", "threads": 1, "save_probabilities": false}

Prints one line per case and the mean foreground Dice; exits non-zero with
one line on stderr when something is wrong.
"""
import json
import os
import sys


def fail(message):
    print("nnunet_validate: " + message, file=sys.stderr)
    sys.exit(1)


def main(request_path):
    with open(request_path) as f:
        req = json.load(f)
    try:
        import torch
        from nnunetv2.evaluation.evaluate_predictions import compute_metrics_on_folder
        from nnunetv2.inference.export_prediction import export_prediction_from_logits
        from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor
        from nnunetv2.training.dataloading.nnunet_dataset import infer_dataset_class
    except ImportError as e:
        fail("this Python has no nnunetv2 (%s); set UP_PYTHON to one that has" % e)

    with open(req["splits_file"]) as f:
        splits = json.load(f)
    fold = int(req["fold"])
    if fold >= len(splits):
        fail("%s has %d folds, not fold %d" % (req["splits_file"], len(splits), fold))
    cases = sorted(splits[fold]["val"])

    torch.set_num_threads(int(req.get("threads", 1)))
    device = torch.device(req["device"])
    predictor = nnUNetPredictor(tile_step_size=0.5, use_gaussian=True, use_mirroring=True,
                                perform_everything_on_device=device.type == "cuda",
                                device=device, verbose=False, verbose_preprocessing=False,
                                allow_tqdm=False)
    predictor.initialize_from_trained_model_folder(req["model_folder"], use_folds=(fold,),
                                                   checkpoint_name="checkpoint_final.pth")
    out = req["output"]
    os.makedirs(out, exist_ok=True)
    dataset = infer_dataset_class(req["data_dir"])(req["data_dir"], cases)
    for k in dataset.identifiers:
        data, _, _, properties = dataset.load_case(k)
        logits = predictor.predict_sliding_window_return_logits(torch.from_numpy(data[:])).cpu()
        export_prediction_from_logits(logits, properties, predictor.configuration_manager,
                                      predictor.plans_manager, predictor.dataset_json,
                                      os.path.join(out, k), bool(req["save_probabilities"]))
        print("predicted %s, shape %s" % (k, tuple(data.shape)), flush=True)

    labels = predictor.plans_manager.get_label_manager(predictor.dataset_json)
    metrics = compute_metrics_on_folder(
        req["gt_folder"], out, os.path.join(out, "summary.json"),
        predictor.plans_manager.image_reader_writer_class(),
        predictor.dataset_json["file_ending"],
        labels.foreground_regions if labels.has_regions else labels.foreground_labels,
        labels.ignore_label, chill=True, num_processes=1)
    print("validation: %d cases, mean foreground Dice %.4f"
          % (len(cases), metrics["foreground_mean"]["Dice"]), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: nnunet_validate.py REQUEST.json")
    main(sys.argv[1])
