#include "algorithms/lowrank/marchenko_pastur.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "sim/base/check.hpp"

namespace ccsim::algo {
namespace {

/// The law of an m x n matrix in the angle variable λ = c - R cos θ (see the header).
struct MpLaw {
  double p = 0, a = 0, c = 0, r_half = 0;  // r_half is R = (b - a) / 2
  MpLaw(uint64_t m, uint64_t n) {
    CCSIM_CHECK(m >= 1 && n >= 1, "Marchenko-Pastur law of a {} x {} matrix", m, n);
    p = static_cast<double>(std::min(m, n));
    const double q = static_cast<double>(std::max(m, n));
    const double sp = std::sqrt(p), sq = std::sqrt(q);
    a = (q - p) * (q - p) / ((sq + sp) * (sq + sp));  // (√q - √p)² without cancellation
    c = p + q;
    r_half = 2 * sp * sq;
  }
  /// sin²φ / (c - R cos φ), written with s = sin²(φ/2) so that it stays exact near φ = 0, where
  /// c - R cos φ = a + 2R s vanishes with a (square matrices; the limit is 2/R).
  double integrand(double phi) const {
    const double s = std::sin(phi / 2) * std::sin(phi / 2);
    const double den = a + 2 * r_half * s;
    return den > 0 ? 4 * s * (1 - s) / den : 2 / r_half;
  }
  /// F(θ) = R² / (2π p) ∫_0^θ integrand.
  double cdf_at_angle(double theta) const;
  double cdf_scale() const { return r_half * r_half / (2 * std::numbers::pi * p); }
};

double simpson(double fa, double fm, double fb, double h) { return h / 6 * (fa + 4 * fm + fb); }

/// Adaptive Simpson with Richardson correction; `tol` is absolute.
template <class F>
double adaptive_simpson(const F& f, double lo, double hi, double flo, double fmid, double fhi, double whole, double tol,
                        int depth) {
  const double mid = (lo + hi) / 2;
  const double fl = f((lo + mid) / 2), fr = f((mid + hi) / 2);
  const double left = simpson(flo, fl, fmid, mid - lo), right = simpson(fmid, fr, fhi, hi - mid);
  const double delta = left + right - whole;
  if (depth <= 0 || std::fabs(delta) <= 15 * tol) return left + right + delta / 15;
  return adaptive_simpson(f, lo, mid, flo, fl, fmid, left, tol / 2, depth - 1) +
         adaptive_simpson(f, mid, hi, fmid, fr, fhi, right, tol / 2, depth - 1);
}

double MpLaw::cdf_at_angle(double theta) const {
  if (theta <= 0) return 0;
  if (theta >= std::numbers::pi) return 1;
  auto f = [this](double phi) { return integrand(phi); };
  const double f0 = f(0), fm = f(theta / 2), f1 = f(theta);
  // Absolute tolerance 1e-13 on F; the integrand's knee near 0 sets the refinement depth.
  const double tol = 1e-13 / cdf_scale();
  const double integral = adaptive_simpson(f, 0, theta, f0, fm, f1, simpson(f0, fm, f1, theta), tol, 60);
  return std::clamp(cdf_scale() * integral, 0.0, 1.0);
}

}  // namespace

double marchenko_pastur_cdf(double lambda, uint64_t m, uint64_t n) {
  const MpLaw law(m, n);
  const double cos_theta = (law.c - lambda) / law.r_half;
  if (cos_theta >= 1) return 0;
  if (cos_theta <= -1) return 1;
  return law.cdf_at_angle(std::acos(cos_theta));
}

double mp_truncation_error(double r, uint64_t m, uint64_t n) {
  const MpLaw law(m, n);
  if (r >= law.p) return 0;
  if (r <= 0) return std::sqrt(static_cast<double>(m) * static_cast<double>(n));
  // λ* at the (1 - r/p) quantile: safeguarded Newton on θ in [0, π] (F' = scale · integrand).
  const double target = 1 - r / law.p;
  double lo = 0, hi = std::numbers::pi, theta = std::numbers::pi * target;
  for (int it = 0; it < 200 && hi - lo > 1e-15; ++it) {
    const double f = law.cdf_at_angle(theta) - target;
    if (std::fabs(f) < 1e-14) break;
    (f < 0 ? lo : hi) = theta;
    const double slope = law.cdf_scale() * law.integrand(theta);
    double next = slope > 0 ? theta - f / slope : lo;
    if (!(next > lo && next < hi)) next = (lo + hi) / 2;
    theta = next;
  }
  const double sq = law.r_half * law.r_half / (2 * std::numbers::pi) * (theta / 2 - std::sin(2 * theta) / 4);
  return std::sqrt(std::max(0.0, sq));
}

}  // namespace ccsim::algo
