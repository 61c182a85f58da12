// See patch_sampler.h.
#include "common/data/patch_sampler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/data/augment.h"
#include "common/data/counter_random.h"

namespace up {
namespace {

bool Has(const std::vector<std::string>& list, const char* name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// The range a patch's origin may take on an axis of `extent` voxels: inside
// the case, or centred over it when the case is smaller.
struct OriginRange {
  int64_t lo, hi;
};
OriginRange RangeOn(int64_t extent, int64_t patch) {
  if (extent >= patch) return {0, extent - patch};
  const int64_t centred = -((patch - extent) / 2);
  return {centred, centred};
}

// The position of every spatial axis of the `index`-th voxel in row-major
// order of `shape`.
std::vector<int64_t> Unravel(int64_t index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> at(shape.size());
  for (size_t a = shape.size(); a-- > 0;) {
    at[a] = index % shape[a];
    index /= shape[a];
  }
  return at;
}

// A gamma in [0.7, 1.5) from u in [0, 1): half the draws below 1, half
// above, as nnU-Net's BGContrast((0.7, 1.5)).
double GammaOf(double u) { return u < 0.5 ? 0.7 + 0.6 * u : 1.0 + (u - 0.5); }

}  // namespace

PatchDraw DrawPatch(const Config& config, int64_t position) {
  const DataConfig& data = config.data;
  const size_t dims = data.size.size();
  uint64_t state = (config.train.seed + 0x5851F42D4C957F2DULL) * 0x2545F4914F6CDD1DULL ^
                   static_cast<uint64_t>(position + 1) * 0xD1342543DE82EF95ULL;
  SplitMix(state);
  // Every number in one fixed order, used or not.
  PatchDraw d;
  d.foreground = Uniform(state) < data.foreground_fraction;
  d.class_u = Uniform(state);
  d.voxel_u = Uniform(state);
  for (size_t a = 0; a < dims; ++a) d.place_u.push_back(Uniform(state));
  const double scale_p = Uniform(state), scale_v = Uniform(state);
  const double rot_v = Uniform(state);
  std::vector<double> flip_v;
  for (size_t a = 0; a < dims; ++a) flip_v.push_back(Uniform(state));
  const double noise_p = Uniform(state), noise_v = Uniform(state);
  const uint64_t noise_seed = SplitMix(state);
  const double bright_p = Uniform(state), bright_v = Uniform(state);
  const double contrast_p = Uniform(state), contrast_v = Uniform(state);
  const double gamma_p = Uniform(state), gamma_v = Uniform(state);
  // Added later, so drawn after the others (the earlier draws stay as they were).
  const double rotate_p = Uniform(state);
  double rotate_v[3];
  for (double& v : rotate_v) v = Uniform(state);
  const double blur_p = Uniform(state);
  const uint64_t blur_seed = SplitMix(state);
  const double lowres_p = Uniform(state);
  const uint64_t lowres_seed = SplitMix(state);
  const double gamma_inv_p = Uniform(state), gamma_inv_v = Uniform(state);
  d.slice_u = Uniform(state);

  const std::vector<std::string>& on = data.augment;
  // nnU-Net's dummy 2-D augmentation (configure_rotation_dummyDA_mirroring_
  // and_inital_patch_size): a 3-D patch whose longest axis is over 3x axis 0.
  const int longest = *std::max_element(data.size.begin(), data.size.end());
  const int shortest = *std::min_element(data.size.begin(), data.size.end());
  d.in_plane = dims == 3 && longest > 3 * data.size[0];
  if (Has(on, "scale") && scale_p < 0.2) d.scale = 0.7 + 0.7 * scale_v;
  if (Has(on, "rotate") && rotate_p < 0.2 && dims >= 2) {
    const double degrees = dims == 3 && !d.in_plane                ? 30.0
                           : dims == 2 && longest > 1.5 * shortest ? 15.0
                                                                   : 180.0;
    const double limit = degrees / 180.0 * M_PI;
    const size_t angles = dims == 3 && !d.in_plane ? 3 : 1;
    for (size_t a = 0; a < angles; ++a) d.rotation.push_back((2 * rotate_v[a] - 1) * limit);
  }
  if (Has(on, "rot90") && dims >= 2 && data.size[dims - 1] == data.size[dims - 2])
    d.rot90 = static_cast<int>(rot_v * 4);
  d.flip.assign(dims, false);
  if (Has(on, "mirror"))
    for (size_t a = 0; a < dims; ++a) d.flip[a] = flip_v[a] < 0.5;
  if (Has(on, "noise") && noise_p < 0.1) {
    d.noise_sigma = std::sqrt(0.1 * noise_v);
    d.noise_seed = noise_seed;
  }
  if (Has(on, "brightness") && bright_p < 0.15) d.brightness = 0.75 + 0.5 * bright_v;
  if (Has(on, "contrast") && contrast_p < 0.15) d.contrast = 0.75 + 0.5 * contrast_v;
  if (Has(on, "gamma") && gamma_p < 0.3) d.gamma = GammaOf(gamma_v);
  if (Has(on, "blur") && blur_p < 0.2) {
    d.blur = true;
    d.blur_seed = blur_seed;
  }
  if (Has(on, "lowres") && lowres_p < 0.25) {
    d.lowres = true;
    d.lowres_seed = lowres_seed;
  }
  if (Has(on, "gamma_inverted") && gamma_inv_p < 0.1) d.gamma_inverted = GammaOf(gamma_inv_v);
  return d;
}

std::vector<int64_t> PatchOrigin(const PatchDraw& draw, const Sample& whole,
                                 const std::vector<int>& patch) {
  const size_t dims = patch.size();
  const torch::Tensor& any = whole.mask.defined() ? whole.mask : whole.image;
  const std::vector<int64_t> shape(any.sizes().end() - static_cast<int64_t>(dims),
                                   any.sizes().end());
  std::vector<OriginRange> range;
  for (size_t a = 0; a < dims; ++a) range.push_back(RangeOn(shape[a], patch[a]));
  std::vector<int64_t> origin(dims);

  if (draw.foreground) {
    // The present foreground classes and, for the chosen one, its voxel.
    std::vector<int64_t> present;
    int64_t index = -1;
    if (!whole.class_locations.empty()) {
      for (size_t k = 1; k < whole.class_locations.size(); ++k)
        if (!whole.class_locations[k].empty()) present.push_back(static_cast<int64_t>(k));
      if (!present.empty()) {
        const auto& at = whole.class_locations[static_cast<size_t>(
            present[static_cast<size_t>(draw.class_u * present.size())])];
        index = at[std::min(static_cast<size_t>(draw.voxel_u * at.size()), at.size() - 1)];
      }
    } else {
      if (!whole.mask.defined())
        throw std::invalid_argument("PatchOrigin: a foreground patch needs the mask or locations");
      const torch::Tensor flat = whole.mask.reshape({-1});
      const int64_t top = flat.numel() ? flat.max().item<int64_t>() : 0;
      const torch::Tensor counts = torch::bincount(flat, {}, top + 1);  // (K,)
      for (int64_t k = 1; k <= top; ++k)
        if (counts[k].item<int64_t>() > 0) present.push_back(k);
      if (!present.empty()) {
        const int64_t k = present[static_cast<size_t>(draw.class_u * present.size())];
        const int64_t n = counts[k].item<int64_t>();
        const int64_t which = std::min<int64_t>(static_cast<int64_t>(draw.voxel_u * n), n - 1);
        index = torch::nonzero(flat == k)[which][0].item<int64_t>();
      }
    }
    if (index >= 0) {
      const std::vector<int64_t> voxel = Unravel(index, shape);
      for (size_t a = 0; a < dims; ++a)
        origin[a] = std::clamp<int64_t>(voxel[a] - patch[a] / 2, range[a].lo, range[a].hi);
      return origin;
    }
  }
  for (size_t a = 0; a < dims; ++a) {
    const int64_t span = range[a].hi - range[a].lo + 1;
    origin[a] =
        range[a].lo + std::min<int64_t>(static_cast<int64_t>(draw.place_u[a] * span), span - 1);
  }
  return origin;
}

torch::Tensor CropWithPadding(const torch::Tensor& t, const std::vector<int64_t>& origin,
                              const std::vector<int64_t>& size) {
  const int64_t lead = t.dim() - static_cast<int64_t>(size.size());
  std::vector<int64_t> shape = t.sizes().vec();
  for (size_t a = 0; a < size.size(); ++a) shape[static_cast<size_t>(lead) + a] = size[a];
  torch::Tensor out = torch::zeros(shape, t.options());
  torch::Tensor src = t, dst = out;
  for (size_t a = 0; a < size.size(); ++a) {
    const int64_t axis = lead + static_cast<int64_t>(a);
    const int64_t lo = std::max<int64_t>(origin[a], 0);
    const int64_t hi = std::min<int64_t>(origin[a] + size[a], t.size(axis));
    if (hi <= lo) return out;  // the region misses the tensor: all padding
    src = src.narrow(axis, lo, hi - lo);
    dst = dst.narrow(axis, lo - origin[a], hi - lo);
  }
  dst.copy_(src);
  return out;
}

std::vector<std::vector<double>> SpatialAffine(const PatchDraw& draw, size_t dims) {
  std::vector<std::vector<double>> a(dims, std::vector<double>(dims, 0.0));
  for (size_t i = 0; i < dims; ++i) a[i][i] = draw.in_plane && i == 0 ? 1.0 : draw.scale;  // S
  auto rotate = [&](size_t p, size_t q, double angle) {  // a = R(p, q) a
    const double c = std::cos(angle), s = std::sin(angle);
    for (size_t j = 0; j < dims; ++j) {
      const double ap = a[p][j], aq = a[q][j];
      a[p][j] = c * ap - s * aq;
      a[q][j] = s * ap + c * aq;
    }
  };
  if (draw.rotation.size() == 3) {
    rotate(1, 2, draw.rotation[0]);  // about axis 0 (x)
    rotate(2, 0, draw.rotation[1]);  // about axis 1 (y)
    rotate(0, 1, draw.rotation[2]);  // about axis 2 (z)
  } else if (draw.rotation.size() == 1) {
    rotate(dims - 2, dims - 1, draw.rotation[0]);
  }
  return a;
}

namespace {

// The patch when `draw` rotates: patch voxel p (centred) shows the case at
// centre + A p (A = SpatialAffine), the image read linearly, the mask from
// the nearest voxel, zero outside the case; from the smallest region of the
// case that holds every such point.
Sample RotatedCut(const Sample& whole, const PatchDraw& draw, const std::vector<int64_t>& origin,
                  const std::vector<int>& patch) {
  namespace F = torch::nn::functional;
  const size_t dims = patch.size();
  const std::vector<std::vector<double>> a = SpatialAffine(draw, dims);
  std::vector<double> centre(dims);
  std::vector<int64_t> start(dims), size(dims);
  for (size_t i = 0; i < dims; ++i) {
    double half = 0;  // how far the rotated patch reaches from its centre on axis i
    for (size_t j = 0; j < dims; ++j) half += std::abs(a[i][j]) * (patch[j] - 1) / 2.0;
    centre[i] = origin[i] + (patch[i] - 1) / 2.0;
    start[i] = static_cast<int64_t>(std::floor(centre[i] - half)) - 1;
    size[i] = static_cast<int64_t>(std::ceil(centre[i] + half)) + 2 - start[i];
  }
  // Each patch voxel's place in the region, as grid_sample reads it: the
  // last axis first, -1 and 1 the region's first and last voxel centres.
  std::vector<torch::Tensor> axes;
  for (size_t j = 0; j < dims; ++j)
    axes.push_back(torch::arange(patch[j], torch::kFloat64) - (patch[j] - 1) / 2.0);
  const std::vector<torch::Tensor> p = torch::meshgrid(axes, "ij");  // each (*patch)
  std::vector<torch::Tensor> grid;
  for (size_t i = dims; i-- > 0;) {
    torch::Tensor at = torch::full_like(p[0], centre[i] - static_cast<double>(start[i]));
    for (size_t j = 0; j < dims; ++j) at = at + a[i][j] * p[j];
    grid.push_back(at * (2.0 / static_cast<double>(size[i] - 1)) - 1.0);
  }
  const torch::Tensor g =
      torch::stack(grid, -1).to(torch::kFloat32).unsqueeze(0);  // (1, *patch, dims)
  Sample out;
  if (whole.image.defined()) {
    const torch::Tensor region = CropWithPadding(whole.image, start, size);  // (C, *size)
    out.image = F::grid_sample(region.unsqueeze(0), g,
                               F::GridSampleFuncOptions()
                                   .mode(torch::kBilinear)
                                   .padding_mode(torch::kZeros)
                                   .align_corners(true))[0];
  }
  if (whole.mask.defined()) {
    const torch::Tensor region = CropWithPadding(whole.mask, start, size);  // (*size)
    out.mask = F::grid_sample(region.unsqueeze(0).unsqueeze(0).to(torch::kFloat32), g,
                              F::GridSampleFuncOptions()
                                  .mode(torch::kNearest)
                                  .padding_mode(torch::kZeros)
                                  .align_corners(true))[0][0]
                   .to(torch::kInt64);
  }
  return out;
}

// Per channel of `channels`: with p 0.5, `axes` draws of U(lo, hi) from
// `seed` (the same on every axis when `one_per_channel`); else none.
std::vector<std::vector<double>> PerChannel(uint64_t seed, int64_t channels, size_t axes, double lo,
                                            double hi, bool one_per_channel) {
  uint64_t state = seed;
  std::vector<std::vector<double>> out(static_cast<size_t>(channels));
  for (auto& c : out) {
    const double p = Uniform(state);
    double v[3];
    for (double& x : v) x = lo + (hi - lo) * Uniform(state);
    if (p >= 0.5) continue;
    for (size_t a = 0; a < axes; ++a) c.push_back(one_per_channel ? v[0] : v[a]);
  }
  return out;
}

// CutPatch with the patch's origin given.
Sample CutPatchAt(const Sample& whole, const PatchDraw& draw, const std::vector<int>& patch,
                  const std::vector<int64_t>& origin) {
  const size_t dims = patch.size();
  // With scaling, the region of the case around the same centre that the
  // patch shows, resampled to the patch (axis 0 stays in-plane only).
  std::vector<int64_t> region(dims), start(dims), target(patch.begin(), patch.end());
  for (size_t a = 0; a < dims; ++a) {
    region[a] = draw.scale == 1 || (draw.in_plane && a == 0)
                    ? patch[a]
                    : std::max<int64_t>(1, std::llround(patch[a] * draw.scale));
    start[a] = origin[a] + patch[a] / 2 - region[a] / 2;
  }
  Sample out;
  if (!draw.rotation.empty()) {
    out = RotatedCut(whole, draw, origin, patch);
    region = target;  // resampled already
  } else {
    if (whole.mask.defined()) out.mask = CropWithPadding(whole.mask, start, region);  // (*region)
    if (whole.image.defined()) out.image = CropWithPadding(whole.image, start, region);
  }
  if (region != target) {
    namespace F = torch::nn::functional;
    if (out.image.defined()) out.image = ResizeLinear(out.image.unsqueeze(0), target)[0];
    if (out.mask.defined()) {
      out.mask =
          F::interpolate(out.mask.unsqueeze(0).unsqueeze(0).to(torch::kFloat32),
                         F::InterpolateFuncOptions().size(target).mode(torch::kNearest))[0][0]
              .to(torch::kInt64);
    }
  }
  if (draw.rot90 != 0) {
    if (out.mask.defined()) out.mask = torch::rot90(out.mask, draw.rot90, {-2, -1});
    if (out.image.defined()) out.image = torch::rot90(out.image, draw.rot90, {-2, -1});
  }
  std::vector<int64_t> mask_axes, image_axes;
  for (size_t a = 0; a < draw.flip.size(); ++a) {
    if (!draw.flip[a]) continue;
    mask_axes.push_back(static_cast<int64_t>(a));
    image_axes.push_back(static_cast<int64_t>(a) + 1);
  }
  if (!mask_axes.empty()) {
    if (out.mask.defined()) out.mask = out.mask.flip(mask_axes);
    if (out.image.defined()) out.image = out.image.flip(image_axes);
  }
  if (out.image.defined()) {
    // nnU-Net's order (get_training_transforms).
    const int64_t channels = out.image.size(0);
    if (draw.noise_sigma > 0) out.image = AddNoise(out.image, draw.noise_sigma, draw.noise_seed);
    if (draw.blur)
      out.image =
          GaussianBlur(out.image, PerChannel(draw.blur_seed, channels, dims, 0.5, 1, false));
    if (draw.brightness != 1) out.image = ScaleBrightness(out.image, draw.brightness);
    if (draw.contrast != 1) out.image = ScaleContrast(out.image, draw.contrast);
    if (draw.lowres) {
      std::vector<std::vector<double>> scales =
          PerChannel(draw.lowres_seed, channels, dims, 0.5, 1, true);
      if (draw.in_plane)
        for (auto& c : scales)
          if (!c.empty()) c[0] = 1;  // nnU-Net's ignore_axes: axis 0 keeps its resolution
      out.image = SimulateLowResolution(out.image, scales);
    }
    if (draw.gamma_inverted != 1) out.image = AdjustGammaInverted(out.image, draw.gamma_inverted);
    if (draw.gamma != 1) out.image = AdjustGamma(out.image, draw.gamma);
    out.image = out.image.contiguous();
  }
  if (out.mask.defined()) out.mask = out.mask.contiguous();
  return out;
}

}  // namespace

Sample CutPatch(const Sample& whole, const PatchDraw& draw, const std::vector<int>& patch) {
  const size_t dims = patch.size();
  const bool slice_wise = whole.mask.defined()
                              ? whole.mask.dim() == static_cast<int64_t>(dims) + 1
                              : whole.image.dim() == static_cast<int64_t>(dims) + 2;
  if (!slice_wise) return CutPatchAt(whole, draw, patch, PatchOrigin(draw, whole, patch));
  // A patch one slice deep, placed as any (a foreground draw: in the chosen
  // voxel's slice, centred on it), then that slice cut as a 2-D case.
  PatchDraw deep = draw;
  deep.place_u.insert(deep.place_u.begin(), draw.slice_u);
  std::vector<int> one_deep{1};
  one_deep.insert(one_deep.end(), patch.begin(), patch.end());
  const std::vector<int64_t> origin = PatchOrigin(deep, whole, one_deep);
  Sample slice;
  if (whole.image.defined()) slice.image = whole.image.select(1, origin[0]);  // (C, H, W)
  if (whole.mask.defined()) slice.mask = whole.mask.select(0, origin[0]);     // (H, W)
  return CutPatchAt(slice, draw, patch, {origin.begin() + 1, origin.end()});
}

}  // namespace up
