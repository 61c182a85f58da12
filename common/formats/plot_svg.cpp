// See plot_svg.h.
#include "common/formats/plot_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace up {
namespace {

// Page geometry (SVG user units = pixels).
constexpr double kWidth = 760;
constexpr double kLeft = 70;   // room for y tick labels
constexpr double kRight = 24;  // right margin
constexpr double kTop = 48;    // room for the title
constexpr double kPanelHeight = 230;
constexpr double kPanelGap = 64;  // x tick labels + the next panel's name
constexpr double kBottom = 44;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string Label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else if (c == '"') {
      out += "&quot;";
    } else {
      out += c;
    }
  }
  return out;
}

// A linear map from data [lo, hi] to pixels [p0, p1].
struct Scale {
  double lo, hi, p0, p1;
  double operator()(double v) const { return p0 + (v - lo) / (hi - lo) * (p1 - p0); }
};

// One panel: frame, grid, tick labels, the curve (split at non-finite
// values) as <polyline class="`name`">.
void Panel(std::ostringstream& svg, const std::vector<MetricsPoint>& points, double top,
           const std::string& name, const std::string& label, double (*value)(const MetricsPoint&),
           const Scale& x, const std::vector<double>& x_ticks, const std::vector<double>& y_ticks,
           const char* colour) {
  const double bottom = top + kPanelHeight;
  const Scale y{y_ticks.front(), y_ticks.back(), bottom, top};
  svg << "<g class=\"panel-" << name << "\">\n";
  svg << "<text x=\"" << Num(kLeft) << "\" y=\"" << Num(top - 10) << "\" font-weight=\"bold\">"
      << Escape(label) << "</text>\n";
  for (double t : y_ticks) {
    svg << "<line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(y(t)) << "\" x2=\""
        << Num(kWidth - kRight) << "\" y2=\"" << Num(y(t)) << "\" stroke=\"#e4e4e4\"/>\n";
    svg << "<text x=\"" << Num(kLeft - 6) << "\" y=\"" << Num(y(t) + 4) << "\" text-anchor=\"end\">"
        << Label(t) << "</text>\n";
  }
  for (double t : x_ticks) {
    svg << "<line x1=\"" << Num(x(t)) << "\" y1=\"" << Num(top) << "\" x2=\"" << Num(x(t))
        << "\" y2=\"" << Num(bottom) << "\" stroke=\"#f0f0f0\"/>\n";
    svg << "<text x=\"" << Num(x(t)) << "\" y=\"" << Num(bottom + 16)
        << "\" text-anchor=\"middle\">" << Label(t) << "</text>\n";
  }
  svg << "<rect x=\"" << Num(kLeft) << "\" y=\"" << Num(top) << "\" width=\""
      << Num(kWidth - kRight - kLeft) << "\" height=\"" << Num(kPanelHeight)
      << "\" fill=\"none\" stroke=\"#888\"/>\n";
  std::string run;
  size_t run_points = 0;
  auto flush = [&] {
    if (run_points > 0) {
      svg << "<polyline class=\"" << name << "\" fill=\"none\" stroke=\"" << colour
          << "\" stroke-width=\"1.8\" points=\"" << run << "\"/>\n";
    }
    run.clear();
    run_points = 0;
  };
  for (const MetricsPoint& p : points) {
    const double v = value(p);
    if (!std::isfinite(v)) {
      flush();
      continue;
    }
    run += (run_points++ ? " " : "") + Num(x(static_cast<double>(p.step))) + "," + Num(y(v));
  }
  flush();
  svg << "</g>\n";
}

// The validation Dice: its points joined across the steps without one, as
// <polyline class="val_dice"> and a <circle> per point, with a legend.
void ValidationSeries(std::ostringstream& svg, const std::vector<MetricsPoint>& points, double top,
                      const Scale& x, const std::vector<double>& y_ticks) {
  const Scale y{y_ticks.front(), y_ticks.back(), top + kPanelHeight, top};
  std::string run;
  std::ostringstream dots;
  for (const MetricsPoint& p : points) {
    if (!std::isfinite(p.val_dice)) continue;
    const std::string px = Num(x(static_cast<double>(p.step))), py = Num(y(p.val_dice));
    run += (run.empty() ? "" : " ") + px + "," + py;
    dots << "<circle class=\"val_dice\" cx=\"" << px << "\" cy=\"" << py
         << "\" r=\"3\" fill=\"#2ca02c\"/>\n";
  }
  if (run.empty()) return;
  svg << "<g class=\"panel-val_dice\">\n<polyline class=\"val_dice\" fill=\"none\" "
         "stroke=\"#2ca02c\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\" points=\""
      << run << "\"/>\n"
      << dots.str();
  const double lx = kWidth - kRight - 150, ly = top + 16;
  svg << "<line x1=\"" << Num(lx) << "\" y1=\"" << Num(ly - 4) << "\" x2=\"" << Num(lx + 20)
      << "\" y2=\"" << Num(ly - 4) << "\" stroke=\"#d62728\" stroke-width=\"1.8\"/>\n"
      << "<text x=\"" << Num(lx + 26) << "\" y=\"" << Num(ly) << "\">training</text>\n"
      << "<line x1=\"" << Num(lx) << "\" y1=\"" << Num(ly + 12) << "\" x2=\"" << Num(lx + 20)
      << "\" y2=\"" << Num(ly + 12) << "\" stroke=\"#2ca02c\" stroke-width=\"1.5\" "
      << "stroke-dasharray=\"5,3\"/>\n"
      << "<text x=\"" << Num(lx + 26) << "\" y=\"" << Num(ly + 16)
      << "\">validation</text>\n</g>\n";
}

double LossOf(const MetricsPoint& p) { return p.loss; }
double DiceOf(const MetricsPoint& p) { return p.dice; }

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int count) {
  if (!(hi > lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
  const double raw = (hi - lo) / std::max(1, count);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw) break;
  }
  const double first = std::floor(lo / step) * step;
  std::vector<double> ticks;
  for (double t = first; ticks.empty() || ticks.back() < hi - step * 1e-9; t += step) {
    ticks.push_back(std::round(t / step) * step);
  }
  return ticks;
}

std::string TrainingCurvesSvg(const std::vector<MetricsPoint>& points, const std::string& title) {
  const double height = kTop + 2 * kPanelHeight + kPanelGap + kBottom;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(kWidth) << "\" height=\""
      << Num(height) << "\" viewBox=\"0 0 " << Num(kWidth) << " " << Num(height)
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << Num(kWidth / 2) << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << Escape(title) << "</text>\n";
  if (points.empty()) {
    svg << "<text x=\"" << Num(kWidth / 2) << "\" y=\"" << Num(height / 2)
        << "\" text-anchor=\"middle\">no steps recorded</text>\n</svg>\n";
    return svg.str();
  }
  int64_t first = points.front().step, last = points.front().step;
  double loss_lo = std::numeric_limits<double>::infinity(), loss_hi = -loss_lo;
  for (const MetricsPoint& p : points) {
    first = std::min(first, p.step);
    last = std::max(last, p.step);
    if (std::isfinite(p.loss)) {
      loss_lo = std::min(loss_lo, p.loss);
      loss_hi = std::max(loss_hi, p.loss);
    }
  }
  if (!std::isfinite(loss_lo)) loss_lo = loss_hi = 0;  // every loss non-finite
  const std::vector<double> x_ticks =
      NiceTicks(static_cast<double>(first), static_cast<double>(last), 8);
  const Scale x{x_ticks.front(), x_ticks.back(), kLeft, kWidth - kRight};
  Panel(svg, points, kTop, "loss", "loss", LossOf, x, x_ticks, NiceTicks(loss_lo, loss_hi, 5),
        "#1f77b4");
  Panel(svg, points, kTop + kPanelHeight + kPanelGap, "dice", "Dice (mean over foreground classes)",
        DiceOf, x, x_ticks, NiceTicks(0, 1, 5), "#d62728");
  ValidationSeries(svg, points, kTop + kPanelHeight + kPanelGap, x, NiceTicks(0, 1, 5));
  svg << "<text x=\"" << Num((kLeft + kWidth - kRight) / 2) << "\" y=\"" << Num(height - 8)
      << "\" text-anchor=\"middle\">optimizer step</text>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace up
