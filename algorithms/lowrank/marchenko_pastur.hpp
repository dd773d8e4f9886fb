#pragma once
/// \file
/// EDGC's compression quantification model (CQM; EDGC App. A, Lemma 1 and Theorem 1): the
/// expected rank-r truncation error of an m x n matrix with i.i.d. N(0, 1) entries, from the
/// Marchenko-Pastur law of the eigenvalues of A A^T.
///
/// With p = min(m, n), q = max(m, n), the p eigenvalues of the p x p Gram matrix have, as p grows,
/// the density f(λ) = sqrt((b - λ)(λ - a)) / (2π p λ) on [a, b], a = (√q - √p)², b = (√q + √p)²
/// (Lemma 1; no atom at 0 since p <= q). By Eckart-Young, ‖A - A_r‖_F² is the sum of the p - r
/// smallest eigenvalues, which the law puts at
///   g(r; m, n)² = p ∫_a^{λ*} λ f(λ) dλ,   F(λ*) = 1 - r / p,
/// i.e. the p - r lower quantiles. Theorem 1 estimates the same sum by Monte Carlo sampling of
/// the law; here it is computed deterministically: with λ = c - R cos θ (c = (a + b)/2,
/// R = (b - a)/2) the CDF is F(θ) = R² / (2π p) ∫_0^θ sin²φ / (c - R cos φ) dφ, integrated by
/// adaptive Simpson quadrature (its integrand is bounded and smooth, with a sharp knee near 0 for
/// nearly square matrices, which the adaptive refinement resolves), λ* found by safeguarded
/// Newton on θ, and the first moment is exact: p ∫_a^{λ*} λ f = R² / (2π) (θ*/2 - sin 2θ* / 4).
/// Sanity: g(0)² = R² / 4 = p q = E‖A‖_F².
///
/// g is a continuous, strictly decreasing function of r on [0, p] (g(p) = 0); the error of a
/// matrix with entry standard deviation σ is σ · g (Theorem 2).

#include <cstdint>

namespace ccsim::algo {

/// CDF of an eigenvalue of A A^T (A m x n, i.i.d. N(0, 1)) under the Marchenko-Pastur law, at λ.
/// 0 below a, 1 above b. Absolute accuracy about 1e-12. REQUIRES: m, n >= 1.
double marchenko_pastur_cdf(double lambda, uint64_t m, uint64_t n);

/// g(r; m, n): the expected ‖A - A_r‖_F of the best rank-r approximation of an m x n matrix with
/// i.i.d. N(0, 1) entries (EDGC Theorem 1), for real r; 0 for r >= min(m, n), sqrt(m n) at r <= 0.
double mp_truncation_error(double r, uint64_t m, uint64_t n);

}  // namespace ccsim::algo
