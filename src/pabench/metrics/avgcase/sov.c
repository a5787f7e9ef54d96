/* Genz's separation-of-variables integrand of the multivariate normal CDF, summed per point and
 * randomisation in one pass (mvn.py's _sov_integrand does the same in PyTorch passes, one per
 * operation and dimension; here every sample's factors stay in registers and L1).
 *
 * Float32 with polynomial approximations of erfinv (Giles', giles_erfinv.h: relative error
 * ~4e-7) and erfc (the Chebyshev fit of Press et al., relative error < 1.2e-7 in exact
 * arithmetic): per factor errors ~1e-6, far below the 1e-4 accuracy asked of the result. Both
 * branches of erfinv are evaluated and selected without a jump, so the sample loops vectorise.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "giles_erfinv.h"

#define BLOCK 256          /* samples per register/L1 block */
#define X_MAX (1.0f - 2e-7f)

static inline float erfinv_f(float x)
{
    float w = -logf((1.0f - x) * (1.0f + x));
    float p = giles_erfinv_centre(w), q = giles_erfinv_tail(w);
    return (w < 5.0f ? p : q) * x;
}

static inline float erfc_f(float x)
{
    float z = fabsf(x);
    float t = 1.0f / (1.0f + 0.5f * z);
    float r = 0.17087277f;
    r = -0.82215223f + t * r;
    r = 1.48851587f + t * r;
    r = -1.13520398f + t * r;
    r = 0.27886807f + t * r;
    r = -0.18628806f + t * r;
    r = 0.09678418f + t * r;
    r = 0.37409196f + t * r;
    r = 1.00002368f + t * r;
    r = -1.26551223f + t * r;
    float y = t * expf(-z * z + r);
    return x >= 0.0f ? y : 2.0f - y;
}

/* out[p * R + r] += sum over samples s0..s0+n-1 of prod_i e_i, for points p < n_pts.
 * lt: (n_pts, k, k) unit-lower factors (row i scaled by its diagonal); bs: (n_pts, k) limits over
 * the diagonal and sqrt(2); keff: finite limits per point (ordered first); w: (k - 1, R, n_total)
 * samples. Returns 0, or -1 when out of memory. With v = erfinv(2u - 1) = Phi^-1(u) / sqrt(2), e_i = erfc((L v)_i - bs_i) / 2. */
int sov_sums(long n_pts, long k, const float *lt, const float *bs, const int64_t *keff, long R,
              long n_total, long s0, long n, const float *w, double *out)
{
    float *vs = malloc(sizeof(float) * (k > 1 ? k - 1 : 1) * BLOCK);
    if (!vs)
        return -1;
    for (long p = 0; p < n_pts; p++) {
        long kq = keff[p];
        if (kq < 2)
            continue;
        const float *L = lt + p * k * k, *b = bs + p * k;
        float e0 = (float)erfc(-(double)b[0]);   /* once per point: libm's, exact to rounding */
        for (long r = 0; r < R; r++) {
            double total = 0.0;
            for (long lo = 0; lo < n; lo += BLOCK) {
                long m = n - lo < BLOCK ? n - lo : BLOCK;
                float e[BLOCK], f[BLOCK], t[BLOCK];
                for (long s = 0; s < m; s++) {
                    e[s] = e0;
                    f[s] = e0;
                }
                for (long i = 1; i < kq; i++) {
                    const float *wi = w + ((i - 1) * R + r) * n_total + s0 + lo;
                    float *vi = vs + (i - 1) * BLOCK;
                    for (long s = 0; s < m; s++) {
                        float x = wi[s] * e[s] - 1.0f;
                        x = x < -X_MAX ? -X_MAX : (x > X_MAX ? X_MAX : x);
                        vi[s] = erfinv_f(x);
                    }
                    const float *Li = L + i * k;
                    float bi = b[i];
                    for (long s = 0; s < m; s++)
                        t[s] = -bi;
                    for (long j = 0; j < i; j++) {
                        float c = Li[j];
                        const float *vj = vs + j * BLOCK;
                        for (long s = 0; s < m; s++)
                            t[s] += c * vj[s];
                    }
                    for (long s = 0; s < m; s++) {
                        e[s] = erfc_f(t[s]);
                        f[s] *= e[s];
                    }
                    if (i % 64 == 0)   /* by 2^-64 exactly, so the product cannot overflow */
                        for (long s = 0; s < m; s++)
                            f[s] *= 0x1p-64f;
                }
                double sum = 0.0;
                for (long s = 0; s < m; s++)
                    sum += f[s];
                total += sum;
            }
            out[p * R + r] += ldexp(total, -(int)(kq - 64 * ((kq - 1) / 64)));
        }
    }
    free(vs);
    return 0;
}
