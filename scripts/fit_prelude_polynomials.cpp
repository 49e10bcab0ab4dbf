// Fits the polynomials of the device prelude's own f32 functions and prints them as the Horner steps their files
// hold. Weighted minimax by Lawson's iteration (iteratively reweighted least squares on Chebyshev points), in long
// double:
//   erf (codegen/prelude/kiln_erf.cuh):
//     |x| <  0.9:  erf(x) = x + x * P(x^2),           P of degree 5, error relative to erf
//     |x| >= 0.9:  erf(x) = 1 - 2^Q(t), t in [0.9, 4], Q of degree 6 ~ log2(erfc(t)); an error d in Q moves erf by
//                  erfc(t) * ln 2 * d, so Q's error is weighted by that, relative to erf.
//   2^x on the FMA pipe (codegen/prelude/kiln_ex2_fma.cuh): 2^x = 2^j * (1 + f * E(f)), j = x rounded to the
//     nearest integer, f = x - j in [-0.5, 0.5], E of degree 4 ~ (2^f - 1) / f (so that 2^0 is exactly 1); an
//     error d in E moves 2^f by f * d, relative to 2^f.
// Not part of the build: g++ -O2 -std=c++17 scripts/fit_prelude_polynomials.cpp -o /tmp/fit && /tmp/fit
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

using Real = long double;
using Fn = std::function<Real(Real)>;

// The c minimising |A c - b| (Householder QR; A is m x n, m >= n, full rank).
std::vector<Real> least_squares(std::vector<std::vector<Real>> A, std::vector<Real> b) {
  const size_t m = A.size(), n = A[0].size();
  for (size_t k = 0; k < n; ++k) {
    Real norm = 0;
    for (size_t i = k; i < m; ++i)
      norm += A[i][k] * A[i][k];
    norm = std::sqrt(norm);
    std::vector<Real> v(m, 0);
    for (size_t i = k; i < m; ++i)
      v[i] = A[i][k];
    v[k] += A[k][k] > 0 ? norm : -norm;
    Real vv = 0;
    for (size_t i = k; i < m; ++i)
      vv += v[i] * v[i];
    auto reflect = [&](auto&& column) {
      Real d = 0;
      for (size_t i = k; i < m; ++i)
        d += v[i] * column(i);
      d = 2 * d / vv;
      for (size_t i = k; i < m; ++i)
        column(i) -= d * v[i];
    };
    for (size_t j = k; j < n; ++j)
      reflect([&](size_t i) -> Real& { return A[i][j]; });
    reflect([&](size_t i) -> Real& { return b[i]; });
  }
  std::vector<Real> c(n);
  for (size_t k = n; k-- > 0;) {
    Real s = b[k];
    for (size_t j = k + 1; j < n; ++j)
      s -= A[k][j] * c[j];
    c[k] = s / A[k][k];
  }
  return c;
}

// Coefficients (constant first) of the degree-`degree` polynomial minimising max |weight * (p - f)| on [lo, hi].
std::vector<Real> weighted_minimax(const Fn& f, const Fn& weight, Real lo, Real hi, int degree, Real* max_error) {
  const int points = 4000;
  std::vector<Real> x(points), fx(points), w(points), lawson(points, Real(1) / points);
  for (int i = 0; i < points; ++i) {
    x[i] = (lo + hi) / 2 + (hi - lo) / 2 * std::cos(M_PIl * (i + Real(0.5)) / points);
    fx[i] = f(x[i]);
    w[i] = weight(x[i]);
  }
  std::vector<Real> c;
  for (int iteration = 0; iteration < 300; ++iteration) {
    std::vector<std::vector<Real>> A(points, std::vector<Real>(degree + 1));
    std::vector<Real> b(points);
    for (int i = 0; i < points; ++i) {
      const Real row = std::sqrt(lawson[i]) * w[i];
      Real power = 1;
      for (int j = 0; j <= degree; ++j, power *= x[i])
        A[i][j] = row * power;
      b[i] = row * fx[i];
    }
    c = least_squares(A, b);
    Real total = 0;
    *max_error = 0;
    for (int i = 0; i < points; ++i) {
      Real p = 0;
      for (int j = degree; j >= 0; --j)
        p = p * x[i] + c[j];
      const Real e = std::fabs(p - fx[i]) * w[i];
      *max_error = std::max(*max_error, e);
      lawson[i] *= e;
      total += lawson[i];
    }
    for (Real& l : lawson)
      l /= total;
  }
  return c;
}

void print_horner(const char* acc, const char* var, const std::vector<Real>& c) {
  std::printf("  float %s = %.9ef;\n", acc, static_cast<double>(static_cast<float>(c.back())));
  for (size_t j = c.size() - 1; j-- > 0;)
    std::printf("  %s = fmaf(%s, %s, %.9ef);\n", acc, acc, var, static_cast<double>(static_cast<float>(c[j])));
}

int main() {
  const Real seam = 0.9L, clamp = 4.0L;
  Real near_error, far_error;
  // P(s) = erf(sqrt s) / sqrt s - 1; an error d in P moves erf by x * d, relative: x / erf(x).
  const std::vector<Real> p = weighted_minimax(
      [](Real s) { return s == 0 ? 2 / std::sqrt(M_PIl) - 1 : std::erf(std::sqrt(s)) / std::sqrt(s) - 1; },
      [](Real s) { return s == 0 ? std::sqrt(M_PIl) / 2 : std::sqrt(s) / std::erf(std::sqrt(s)); }, 0, seam * seam, 5,
      &near_error);
  const std::vector<Real> q = weighted_minimax([](Real t) { return std::log2(std::erfc(t)); },
                                               [](Real t) { return std::erfc(t) * M_LN2l / std::erf(t); }, seam,
                                               clamp, 6, &far_error);
  std::printf("// |x| < %.2Lf: relative error %.3Lg; |x| >= %.2Lf: %.3Lg (before rounding to f32)\n", seam, near_error,
              seam, far_error);
  print_horner("p", "s", p);
  print_horner("q", "t", q);
  Real ex2_error;
  const std::vector<Real> e = weighted_minimax(
      [](Real f) { return f == 0 ? M_LN2l : std::expm1(f * M_LN2l) / f; },
      [](Real f) { return std::fabs(f) / std::exp2(f); }, -0.5L, 0.5L, 4, &ex2_error);
  std::printf("// 2^f, f in [-0.5, 0.5]: relative error %.3Lg (before rounding to f32)\n", ex2_error);
  print_horner("e", "f", e);
}
