/* Fused corruption kernels over a batch of uint8 images (N, H, W, C), written as uint8.
 *
 * Each kernel is the same arithmetic, in the same order, as its numpy / PyTorch fallback in
 * noise.py, blur.py, weather.py and digital.py, so that both give the same bytes: the build
 * uses -ffp-contract=off (no fused multiply-adds) and no -ffast-math (no reordering).  The one
 * exception, Gaussian noise, computes integers that do not depend on float rounding (its
 * comment says how), so its approximations may use explicit fmaf.
 * Random draws are rng.py's counter stream: draw j of image i is a pure function of
 * (key, i, j), so results do not depend on batching.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "giles_erfinv.h"

/* 8 doubles, lane-wise operations (GCC / clang vector extension): each lane does the scalar
 * operations, in the same order */
typedef double v8d __attribute__((vector_size(64)));
typedef double v8du __attribute__((vector_size(64), aligned(8)));   /* at any double */

/* ---- rng.py's stream: SplitMix64's finaliser of (index << 32) + counter, times GAMMA, + key */

static inline uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Draws 0..n-1 of image `index`, starting at pair counter c0 (two 24-bit draws per hash);
 * u must hold n + 1 floats. */
static void uniforms(uint64_t key, uint64_t index, uint64_t c0, long n, float *u) {
    uint64_t base = (index << 32) + c0;
    long pairs = (n + 1) / 2;
    for (long p = 0; p < pairs; p++) {
        uint64_t z = mix((base + (uint64_t)p) * 0x9E3779B97F4A7C15ULL + key);
        u[2 * p] = ((float)(uint32_t)(z >> 40) + 0.5f) * 0x1p-24f;
        u[2 * p + 1] = ((float)(uint32_t)(z & 0xFFFFFF) + 0.5f) * 0x1p-24f;
    }
}

/* log for normal positive floats: exponent plus an atanh series of the mantissa (rng.py's
 * `_log` does the same float operations). */
static inline float log_pos(float a) {
    uint32_t bits;
    memcpy(&bits, &a, 4);
    float e = (float)((int32_t)(bits >> 23) - 127);
    bits = (bits & 0x7FFFFFu) | 0x3F800000u;
    float m;
    memcpy(&m, &bits, 4);
    if (m > 1.41421356f) {
        m = m * 0.5f;
        e = e + 1.0f;
    }
    float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
    float poly = 0.142857143f + s2 * 0.111111111f;
    poly = 0.2f + s2 * poly;
    poly = 0.333333333f + s2 * poly;
    poly = 1.0f + s2 * poly;
    return e * 0.693147181f + (2.0f * s) * poly;
}

/* Standard normal from a uniform in (0, 1): sqrt(2) erfinv(2u - 1) by Giles' erfinv
 * (giles_erfinv.h).  This is its central branch, right where *w_out < 5; normal_tail is the
 * other. */
static inline float normal_from_uniform(float u, float *w_out) {
    float x = 2.0f * u - 1.0f;
    float w = -log_pos((1.0f - x) * (1.0f + x));
    *w_out = w;
    return (giles_erfinv_centre(w) * x) * 1.41421356f;
}

static float normal_tail(float u, float w) {
    float x = 2.0f * u - 1.0f;
    return (giles_erfinv_tail(w) * x) * 1.41421356f;
}

static inline uint8_t unit_to_u8(float v) {      /* clip to [0, 1], scale, truncate */
    v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
    return (uint8_t)(v * 255.0f);
}

/* ---- noise: one draw per value, values in the image's own (H, W, C) order (speckle, impulse;
 * Gaussian noise below) */

enum { SPECKLE = 1, IMPULSE = 2 };

void cc_noise(const uint8_t *img, uint8_t *out, long n_img, long n, const uint64_t *index,
              uint64_t key, uint64_t c0, int kind, float c) {
    float *u = malloc((n + 1) * sizeof(float)), *w = malloc(n * sizeof(float));
    float half = c * 0.5f;
    for (long b = 0; b < n_img; b++) {
        const uint8_t *x = img + b * n;
        uint8_t *y = out + b * n;
        uniforms(key, index[b], c0, n, u);
        if (kind == IMPULSE) {
            /* u < c: replaced, by 1 when u < c / 2 (so with equal chance); a value kept is
             * (x / 255) * 255, which is exactly x for every uint8 x in float32 */
            for (long i = 0; i < n; i++) {
                uint8_t flip = u[i] < c ? 0xFF : 0, salt = u[i] < half ? 0xFF : 0;
                y[i] = (uint8_t)((x[i] & ~flip) | (salt & flip));
            }
        } else {
            /* the normal's central branch for all, vectorised; the rare tail (w >= 5: about 0.3%
             * of draws) recomputed after */
            for (long i = 0; i < n; i++) {
                float z = normal_from_uniform(u[i], &w[i]);
                float v = (float)x[i] / 255.0f;
                y[i] = unit_to_u8(v + (v * c) * z);
            }
            for (long i = 0; i < n; i++)
                if (w[i] >= 5.0f) {
                    float z = normal_tail(u[i], w[i]);
                    float v = (float)x[i] / 255.0f;
                    y[i] = unit_to_u8(v + (v * c) * z);
                }
        }
    }
    free(w);
    free(u);
}

/* Gaussian noise: out = clip(x + D, 0, 255), D the integer offset of noise.gaussian_thresholds:
 * D = -256 + #(thr <= k) for the draw's 24 bits k (thr: 511 ascending thresholds).  The search
 * is the exact answer; the fast path gets the same D from an approximate quantile: with
 * q = min(u, 1 - u) (as k or 2^24 - 1 - k, so q is exact in float32), Phi^-1(q) is a degree-4
 * polynomial on each half-octave of q in [2^-13, 1/2) (coef[j * 32 + segment], 24 segments; error
 * 2e-6 at most), and s = 255 c z is floored.  Whenever s lies within `guard` of a whole number, or q
 * is below 2^-13 (1.2e-4 of draws), the search decides, so both give the same D for every k
 * (tested on all 2^24). */
#define GAUSS_SEG0 ((127 - 13) * 2)     /* (exponent << 1 | top mantissa bit) of q = 2^-13 */

static inline int gauss_search(uint32_t k, const uint32_t *thr) {
    int lo = 0, hi = 511;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (thr[mid] <= k) lo = mid + 1;
        else hi = mid;
    }
    return lo - 256;
}

static inline int gauss_offset(uint32_t k, const float *coef, const uint32_t *thr, float scale,
                               float guard) {
    uint32_t upper = k >> 23, kk = upper ? 0xFFFFFFu - k : k;
    float q = ((float)kk + 0.5f) * 0x1p-24f;
    uint32_t bits;
    memcpy(&bits, &q, 4);
    int seg = (int)(bits >> 22) - GAUSS_SEG0;
    if (seg >= 0) {
        uint32_t mbits = (bits & 0x3FFFFFu) | 0x3F800000u;   /* mantissa in [1, 1.5) */
        float m;
        memcpy(&m, &mbits, 4);
        float t = fmaf(4.0f, m, -5.0f), p = coef[4 * 32 + seg];
        for (int j = 3; j >= 0; j--) p = fmaf(p, t, coef[j * 32 + seg]);
        float s = p * (upper ? -scale : scale), f = floorf(s), r = s - f;
        if (r >= guard && r <= 1.0f - guard) return (int)f;
    }
    return gauss_search(k, thr);
}

static inline uint8_t clamp_u8(int v) { return (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v)); }

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>
/* gauss_offset of 16 draws k at once (lanes in `*slow` still need gauss_search): the
 * polynomial's coefficients come from two registers per degree (vpermt2ps on the segment). */
static inline __m512i gauss16_offsets(__m512i k, const __m512 c[5][2], float scale, float guard,
                                      __mmask16 *slow) {
    __mmask16 upper = _mm512_cmpge_epu32_mask(k, _mm512_set1_epi32(1 << 23));
    __m512i kk = _mm512_mask_sub_epi32(k, upper, _mm512_set1_epi32(0xFFFFFF), k);
    __m512 q = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(kk), _mm512_set1_ps(0.5f)),
                             _mm512_set1_ps(0x1p-24f));
    __m512i bits = _mm512_castps_si512(q);
    __m512i seg = _mm512_sub_epi32(_mm512_srli_epi32(bits, 22), _mm512_set1_epi32(GAUSS_SEG0));
    __m512 m = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi32(0x3FFFFF)),
                                                   _mm512_set1_epi32(0x3F800000)));
    __m512 t = _mm512_fmadd_ps(m, _mm512_set1_ps(4.0f), _mm512_set1_ps(-5.0f));
    __m512 p = _mm512_permutex2var_ps(c[4][0], seg, c[4][1]);
    for (int j = 3; j >= 0; j--)
        p = _mm512_fmadd_ps(p, t, _mm512_permutex2var_ps(c[j][0], seg, c[j][1]));
    __m512 s = _mm512_mul_ps(p, _mm512_mask_blend_ps(upper, _mm512_set1_ps(scale), _mm512_set1_ps(-scale)));
    __m512 f = _mm512_roundscale_ps(s, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(s, f);
    *slow = _mm512_cmplt_epi32_mask(seg, _mm512_setzero_si512())
          | _mm512_cmp_ps_mask(r, _mm512_set1_ps(guard), _CMP_LT_OQ)
          | _mm512_cmp_ps_mask(r, _mm512_set1_ps(1.0f - guard), _CMP_GT_OQ);
    return _mm512_cvtps_epi32(f);
}

/* 16 values x[0..15] with the draws of 8 hashes from pair counter p0 */
static inline void gauss16(const uint8_t *x, uint8_t *y, uint64_t p0, uint64_t key,
                           const __m512 c[5][2], const uint32_t *thr, float scale, float guard) {
    const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    __m512i z = _mm512_add_epi64(_mm512_set1_epi64((long long)p0), lane);
    z = _mm512_add_epi64(_mm512_mullo_epi64(z, _mm512_set1_epi64((long long)0x9E3779B97F4A7C15ULL)),
                         _mm512_set1_epi64((long long)key));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                           _mm512_set1_epi64((long long)0xBF58476D1CE4E5B9ULL));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                           _mm512_set1_epi64((long long)0x94D049BB133111EBULL));
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
    /* each hash's two draws, z >> 40 then z & 0xFFFFFF, as adjacent 32-bit lanes */
    __m512i k = _mm512_or_si512(_mm512_srli_epi64(z, 40),
                                _mm512_slli_epi64(_mm512_and_si512(z, _mm512_set1_epi64(0xFFFFFF)), 32));
    __mmask16 slow;
    __m512i d = gauss16_offsets(k, c, scale, guard, &slow);
    __m512i v = _mm512_add_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x)), d);
    _mm_storeu_si128((__m128i *)y, _mm512_cvtusepi32_epi8(_mm512_max_epi32(v, _mm512_setzero_si512())));
    if (slow) {                      /* about 1% of groups */
        uint32_t ks[16];
        _mm512_storeu_si512(ks, k);
        for (int l = 0; l < 16; l++)
            if (slow >> l & 1) y[l] = clamp_u8(x[l] + gauss_search(ks[l], thr));
    }
}

static void load_gauss_coef(const float *coef, __m512 c[5][2]) {
    for (int j = 0; j < 5; j++) {
        c[j][0] = _mm512_loadu_ps(coef + j * 32);
        c[j][1] = _mm512_loadu_ps(coef + j * 32 + 16);
    }
}
#endif

void cc_gaussian(const uint8_t *img, uint8_t *out, long n_img, long n, const uint64_t *index,
                 uint64_t key, uint64_t c0, const float *coef, const uint32_t *thr, float scale,
                 float guard) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    __m512 c[5][2];
    load_gauss_coef(coef, c);
#endif
    for (long b = 0; b < n_img; b++) {
        const uint8_t *x = img + b * n;
        uint8_t *y = out + b * n;
        uint64_t base = (index[b] << 32) + c0;
        long i = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
        for (; i + 16 <= n; i += 16) gauss16(x + i, y + i, base + (uint64_t)(i / 2), key, c, thr, scale, guard);
#endif
        for (; i < n; i += 2) {
            uint64_t z = mix((base + (uint64_t)(i / 2)) * 0x9E3779B97F4A7C15ULL + key);
            y[i] = clamp_u8(x[i] + gauss_offset((uint32_t)(z >> 40), coef, thr, scale, guard));
            if (i + 1 < n)
                y[i + 1] = clamp_u8(x[i + 1] + gauss_offset((uint32_t)(z & 0xFFFFFF), coef, thr, scale, guard));
        }
    }
}

/* D of given draws k, by the kernel's paths (the exhaustive test runs it on all 2^24) */
void cc_gaussian_offsets(const uint32_t *k, int32_t *d, long n, const float *coef,
                         const uint32_t *thr, float scale, float guard) {
    long i = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    __m512 c[5][2];
    load_gauss_coef(coef, c);
    for (; i + 16 <= n; i += 16) {
        __mmask16 slow;
        _mm512_storeu_si512(d + i, gauss16_offsets(_mm512_loadu_si512(k + i), c, scale, guard, &slow));
        for (int l = 0; l < 16; l++)
            if (slow >> l & 1) d[i + l] = gauss_search(k[i + l], thr);
    }
#endif
    for (; i < n; i++) d[i] = gauss_offset(k[i], coef, thr, scale, guard);
}

/* Poisson(level / 255 * photons) by inverse CDF: thr (256, k_max) float32, the smallest float32
 * above each CDF value (so `cdf < u`, in double, is `thr <= u` for the float32 uniforms, exactly,
 * from a table half the size, which stays in L2 at 500 photons), and guide (256, n_guide + 1) the
 * first candidate of each cell of u, as int16 (k_max < 32768).  Most cells hold one candidate
 * (lo == hi; 85-95% of them at 512 cells, 50-500 photons): those need no look-up in thr. */
void cc_shot_noise(const uint8_t *img, uint8_t *out, long n_img, long n, const uint64_t *index,
                   uint64_t key, uint64_t c0, const float *thr, const int16_t *guide, long k_max,
                   long n_guide, float photons) {
    float *u = malloc((n + 1) * sizeof(float));
    uint8_t *to_u8 = malloc(k_max);                 /* count -> output byte, made once */
    for (long k = 0; k < k_max; k++) to_u8[k] = unit_to_u8((float)k / photons);
    for (long b = 0; b < n_img; b++) {
        const uint8_t *x = img + b * n;
        uint8_t *y = out + b * n;
        uniforms(key, index[b], c0, n, u);
        for (long i = 0; i < n; i++) {
            long level = x[i];
            long at = level * (n_guide + 1) + (long)(u[i] * (float)n_guide);
            long lo = guide[at], hi = guide[at + 1];
            /* the first k in [lo, hi] with cdf >= u: what the fallback's bisection finds */
            if (lo < hi) {
                const float *row = thr + level * k_max;
                while (lo < hi && row[lo] <= u[i]) lo++;
            }
            y[i] = to_u8[lo];
        }
    }
    free(to_u8);
    free(u);
}

/* ---- blur */

static inline long clampi(long i, long n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

static inline long mirror(long i, long n) {      /* OpenCV's BORDER_REFLECT_101 */
    if (i >= 0 && i < n) return i;               /* inside: no division */
    long period = n > 1 ? 2 * n - 2 : 1;
    i %= period;
    if (i < 0) i += period;
    return i < period - i ? i : period - i;
}

/* acc[r, q, :] += weight * src[rows[r], cols[q], :] for all r, q of one (h, w, c) image;
 * the columns run contiguous where cols[q] = q + dx. */
static void add_shifted(double *acc, const double *src, long h, long w, long c, const long *rows,
                        const long *cols, long dx, double weight) {
    long q0 = dx < 0 ? -dx : 0, q1 = dx > 0 ? w - dx : w;   /* q + dx inside [0, w) */
    if (q0 > w) q0 = w;                                      /* a shift wider than the image */
    if (q1 < q0) q1 = q0;
    for (long r = 0; r < h; r++) {
        double *a = acc + r * w * c;
        const double *s = src + rows[r] * w * c;
        for (long q = 0; q < q0; q++)
            for (long k = 0; k < c; k++) a[q * c + k] += weight * s[cols[q] * c + k];
        const double *sm = s + dx * c;
        for (long j = q0 * c; j < q1 * c; j++) a[j] += weight * sm[j];
        for (long q = q1; q < w; q++)
            for (long k = 0; k < c; k++) a[q * c + k] += weight * s[cols[q] * c + k];
    }
}

/* ImageMagick's motion blur of one (h, w, c) image held as doubles: tap t reads the pixel at
 * (dy, dx)[t] (edges repeated), weights k, summed tap by tap into acc and rounded half to even;
 * rows (h) and cols (w) are scratch. */
static void motion_image(const double *src, double *acc, long h, long w, long c, const double *k,
                         long taps, const int64_t *dy, const int64_t *dx, long *rows, long *cols) {
    memset(acc, 0, h * w * c * sizeof(double));
    for (long t = 0; t < taps; t++) {
        long sy = dy[t], sx = dx[t];
        for (long r = 0; r < h; r++) rows[r] = clampi(r + sy, h);
        for (long q = 0; q < w; q++) cols[q] = clampi(q + sx, w);
        add_shifted(acc, src, h, w, c, rows, cols, sx, k[t]);
    }
    for (long i = 0; i < h * w * c; i++) acc[i] = rint(acc[i]);
}

/* Motion blur of uint8 (h, w, c) images, (dy, dx) (n_img, taps) per image. */
void cc_motion_blur(const uint8_t *img, uint8_t *out, long n_img, long h, long w, long c,
                    const double *k, long taps, const int64_t *dy, const int64_t *dx) {
    long n = h * w * c;
    double *src = malloc(n * sizeof(double)), *acc = malloc(n * sizeof(double));
    long *rows = malloc(h * sizeof(long)), *cols = malloc(w * sizeof(long));
    for (long b = 0; b < n_img; b++) {
        for (long i = 0; i < n; i++) src[i] = (double)img[b * n + i];
        motion_image(src, acc, h, w, c, k, taps, dy + b * taps, dx + b * taps, rows, cols);
        for (long i = 0; i < n; i++)
            out[b * n + i] = (uint8_t)(acc[i] < 0 ? 0 : (acc[i] > 255 ? 255 : acc[i]));
    }
    free(src), free(acc), free(rows), free(cols);
}

/* Correlation of each channel of x / 255 with a (kh, kw) kernel, mirrored borders, taps in
 * row-major order; clipped to [0, 1], times 255, truncated.  Each image is first laid out with
 * its mirrored border (pad), so that every tap is a plain shifted load; 8 outputs at a time
 * sum all their taps in registers, in the fallback's order (0 + k0 x0 + k1 x1 + ...). */
void cc_defocus(const uint8_t *img, uint8_t *out, long n_img, long h, long w, long c,
                const double *kernel, long kh, long kw) {
    long row = w * c, wp = w + kw - 1, hp = h + kh - 1, rowp = wp * c;
    double *pad = malloc(hp * rowp * sizeof(double)), *acc = malloc(row * sizeof(double));
    long *rows = malloc(hp * sizeof(long)), *cols = malloc(wp * sizeof(long));
    for (long r = 0; r < hp; r++) rows[r] = mirror(r - kh / 2, h);
    for (long q = 0; q < wp; q++) cols[q] = mirror(q - kw / 2, w);
    for (long b = 0; b < n_img; b++) {
        const uint8_t *x = img + b * h * row;
        for (long r = 0; r < hp; r++) {
            const uint8_t *xr = x + rows[r] * row;
            double *pr = pad + r * rowp;
            for (long j = 0; j < row; j++) pr[(kw / 2) * c + j] = (double)xr[j] / 255.0;
            for (long q = 0; q < wp; q++)                      /* the mirrored columns */
                if (q < kw / 2 || q >= kw / 2 + w)
                    for (long k = 0; k < c; k++) pr[q * c + k] = (double)xr[cols[q] * c + k] / 255.0;
        }
        long full = row - row % 8;
        for (long r = 0; r < h; r++) {
            for (long j = 0; j < full; j += 8) {
                v8d sum = {0};
                for (long i = 0; i < kh; i++)
                    for (long t = 0; t < kw; t++)
                        sum += kernel[i * kw + t] * *(const v8du *)(pad + (r + i) * rowp + t * c + j);
                memcpy(acc + j, &sum, sizeof sum);
            }
            for (long j = full; j < row; j++) {
                double sum = 0;
                for (long i = 0; i < kh; i++)
                    for (long t = 0; t < kw; t++) sum += kernel[i * kw + t] * pad[(r + i) * rowp + t * c + j];
                acc[j] = sum;
            }
            for (long q = 0; q < row; q++) {
                double v = acc[q] < 0 ? 0 : (acc[q] > 1 ? 1 : acc[q]);
                out[b * h * row + r * row + q] = (uint8_t)(v * 255.0);
            }
        }
    }
    free(pad), free(acc), free(rows), free(cols);
}

/* ---- weather and digital */

/* w_image * x + w_frost * texture crop, clipped to [0, 255]; textures (T, side, side, 3) uint8,
 * laid out like the images, so that each row of the crop is one contiguous, vectorised loop. */
void cc_frost(const uint8_t *restrict img, uint8_t *restrict out, long n_img, long h, long w,
              const uint8_t *restrict tex, long side, const int64_t *pick, const int64_t *top,
              const int64_t *left, double w_image, double w_frost) {
    for (long b = 0; b < n_img; b++)
        for (long r = 0; r < h; r++) {
            const uint8_t *t = tex + ((pick[b] * side + top[b] + r) * side + left[b]) * 3;
            const uint8_t *x = img + (b * h + r) * w * 3;
            uint8_t *y = out + (b * h + r) * w * 3;
            for (long i = 0; i < w * 3; i++) {
                double v = w_image * (double)x[i] + w_frost * (double)t[i];
                y[i] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
            }
        }
}

/* HSV value + c: the pixel scaled by V' / V (a black pixel becomes grey V').  An output byte
 * depends only on its own input byte x and the pixel's largest byte m (V = m / 255), so the
 * kernel computes all 256 x 256 of them once per severity (table[m * 256 + x], with the scalar
 * formula) and then looks each one up: the same bytes, 4-6x faster per pixel. */
void cc_brightness_table(double c, uint8_t *table) {
    for (int m = 0; m < 256; m++) {
        double v = (double)m / 255.0, v2 = v + c;
        v2 = v2 < 0 ? 0 : (v2 > 1 ? 1 : v2);
        double ratio = v2 / (v > 1e-12 ? v : 1e-12);
        for (int x = 0; x <= m; x++) {                 /* x > m cannot occur */
            double y = v > 0 ? ((double)x / 255.0) * ratio : v2;
            table[m * 256 + x] = (uint8_t)((y < 0 ? 0 : (y > 1 ? 1 : y)) * 255.0);
        }
    }
}

void cc_brightness(const uint8_t *restrict img, uint8_t *restrict out, long n_pix,
                   const uint8_t *restrict table) {
    for (long p = 0; p < n_pix; p++) {
        uint8_t x0 = img[3 * p], x1 = img[3 * p + 1], x2 = img[3 * p + 2];
        uint8_t m = x0 > x1 ? x0 : x1;
        const uint8_t *t = table + (m > x2 ? m : x2) * 256;
        out[3 * p] = t[x0], out[3 * p + 1] = t[x1], out[3 * p + 2] = t[x2];
    }
}

/* Fog: (x / 255 + strength * plasma) * top / (top + strength), top = the image's largest x / 255,
 * clipped to [0, 1], times 255, truncated; plasma (n_img, size, size) doubles, its top-left
 * (h, w) corner used (weather.fog's operations, in its order). */
void cc_fog(const uint8_t *restrict img, uint8_t *restrict out, long n_img, long h, long w,
            const double *restrict plasma, long size, double strength) {
    long n = h * w * 3;
    for (long b = 0; b < n_img; b++) {
        const uint8_t *x = img + b * n;
        uint8_t m = 0;
        for (long i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
        double top = (double)m / 255.0, scale = top + strength;
        for (long r = 0; r < h; r++) {
            const double *p = plasma + (b * size + r) * size;
            for (long q = 0; q < w; q++) {
                double fog = strength * p[q];
                for (long k = 0; k < 3; k++) {
                    long i = (r * w + q) * 3 + k;
                    double v = ((double)x[i] / 255.0 + fog) * top / scale;
                    out[b * n + i] = (uint8_t)((v < 0 ? 0 : (v > 1 ? 1 : v)) * 255.0);
                }
            }
        }
    }
}

/* (x - m) * c + m per channel, m the channel's mean (exact integer sum / pixels / 255). */
void cc_contrast(const uint8_t *img, uint8_t *out, long n_img, long hw, double c) {
    for (long b = 0; b < n_img; b++) {
        const uint8_t *x = img + b * hw * 3;
        uint8_t *y = out + b * hw * 3;
        long sum[3] = {0, 0, 0};
        for (long p = 0; p < hw; p++)
            for (long k = 0; k < 3; k++) sum[k] += x[3 * p + k];
        double m[3];
        for (long k = 0; k < 3; k++) m[k] = (double)sum[k] / (double)hw / 255.0;
        for (long p = 0; p < hw; p++)
            for (long k = 0; k < 3; k++) {
                double v = ((double)x[3 * p + k] / 255.0 - m[k]) * c + m[k];
                v = v < 0 ? 0 : (v > 1 ? 1 : v);
                y[3 * p + k] = (uint8_t)(v * 255.0);
            }
    }
}

/* Pillow's BOX passes, on 8 images at once: lane l of every v8d holds image l, and each lane
 * does the scalar operations in the fallback's order (the same bytes, 8 images per instruction;
 * the box of each output is found once, not per image). */
static inline v8d round8(v8d v) {                /* floor(v + 0.5), lane by lane */
    v += 0.5;
    v8d r;
    for (int l = 0; l < 8; l++) r[l] = floor(v[l]);
    return r;
}

/* One pass along the first axis of src (n_in, len): dst[o] = round(sum of weight[o, j] * src[j]
 * over j with a non-zero weight, from 0, j ascending).  The weights are non-negative and sum
 * to 1: no clipping needed. */
static void box_pass(const v8d *restrict src, v8d *restrict dst, long n_in, long n_out, long len,
                     const double *weight) {
    for (long o = 0; o < n_out; o++) {
        v8d *d = dst + o * len;
        for (long i = 0; i < len; i++) d[i] = (v8d){0};
        for (long j = 0; j < n_in; j++) {
            double wj = weight[o * n_in + j];
            if (wj == 0) continue;
            for (long i = 0; i < len; i++) d[i] += src[j * len + i] * wj;
        }
        for (long i = 0; i < len; i++) d[i] = round8(d[i]);
    }
}

/* The same pass along the middle axis of src (rows, n_in, 3): dst (rows, n_out, 3), each output
 * summed over its non-zero weights, which are contiguous (a box), in the same order. */
static void box_rows(const v8d *restrict src, v8d *restrict dst, long rows, long n_in, long n_out,
                     const double *weight) {
    long lo[n_out], hi[n_out];
    for (long o = 0; o < n_out; o++) {
        lo[o] = n_in, hi[o] = 0;
        for (long j = 0; j < n_in; j++)
            if (weight[o * n_in + j] != 0) {
                if (j < lo[o]) lo[o] = j;
                hi[o] = j + 1;
            }
    }
    for (long r = 0; r < rows; r++) {
        const v8d *s = src + r * n_in * 3;
        v8d *d = dst + r * n_out * 3;
        for (long o = 0; o < n_out; o++) {
            v8d a = {0}, b = {0}, c = {0};
            for (long j = lo[o]; j < hi[o]; j++) {
                double wj = weight[o * n_in + j];
                if (wj == 0) continue;
                a += s[3 * j] * wj, b += s[3 * j + 1] * wj, c += s[3 * j + 2] * wj;
            }
            d[3 * o] = round8(a), d[3 * o + 1] = round8(b), d[3 * o + 2] = round8(c);
        }
    }
}

/* Whether every output of a weight matrix (n_out, n_in) takes one input at weight 1 (Pillow's BOX
 * upscaling), and which (tap[o]): such a pass copies, since 0 + x * 1 = x and floor(x + 0.5) = x
 * for the whole numbers it is given. */
static int single_taps(const double *weight, long n_out, long n_in, long *tap) {
    for (long o = 0; o < n_out; o++) {
        long found = -1;
        for (long j = 0; j < n_in; j++) {
            double wj = weight[o * n_in + j];
            if (wj == 0) continue;
            if (wj != 1.0 || found >= 0) return 0;
            found = j;
        }
        if (found < 0) return 0;
        tap[o] = found;
    }
    return 1;
}

/* Between 8 images of n bytes and lane-wise doubles.  With AVX-512 (VBMI, DQ), 8 positions at a
 * time: the 8 x 8 block of bytes (image, position) is transposed by one byte permutation
 * (vpermb) instead of 64 single-byte moves; elsewhere, and for a ragged end (n not a multiple
 * of 8), byte by byte.  Only data moves: the values are exact either way. */
#if defined(__AVX512VBMI__) && defined(__AVX512DQ__) && defined(__AVX512BW__)
#include <immintrin.h>
#define BLOCK_TRANSPOSE 1

static inline __m512i transpose8x8(__m512i m) {       /* byte 8 r + c -> byte 8 c + r */
    const __m512i t = _mm512_set_epi8(
        63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6,
        61, 53, 45, 37, 29, 21, 13, 5, 60, 52, 44, 36, 28, 20, 12, 4,
        59, 51, 43, 35, 27, 19, 11, 3, 58, 50, 42, 34, 26, 18, 10, 2,
        57, 49, 41, 33, 25, 17, 9, 1, 56, 48, 40, 32, 24, 16, 8, 0);
    return _mm512_permutexvar_epi8(t, m);
}

static inline long long load8(const uint8_t *p) {
    long long v;
    memcpy(&v, p, 8);
    return v;
}

static inline v8d bytes_to_lanes(__m128i q) {           /* the low 8 bytes as 8 doubles */
    return (v8d)_mm512_cvtepi64_pd(_mm512_cvtepu8_epi64(q));
}
#endif

/* a[i][l] = img[l * n + i] for the 8 images of img */
static void to_lanes(const uint8_t *img, long n, v8d *a) {
    long i = 0;
#ifdef BLOCK_TRANSPOSE
    for (; i + 8 <= n; i += 8) {
        __m512i m = _mm512_set_epi64(load8(img + 7 * n + i), load8(img + 6 * n + i),
                                     load8(img + 5 * n + i), load8(img + 4 * n + i),
                                     load8(img + 3 * n + i), load8(img + 2 * n + i),
                                     load8(img + n + i), load8(img + i));
        m = transpose8x8(m);                              /* 8-byte word p: position i + p */
        __m128i q01 = _mm512_castsi512_si128(m), q23 = _mm512_extracti64x2_epi64(m, 1),
                q45 = _mm512_extracti64x2_epi64(m, 2), q67 = _mm512_extracti64x2_epi64(m, 3);
        a[i] = bytes_to_lanes(q01), a[i + 1] = bytes_to_lanes(_mm_srli_si128(q01, 8));
        a[i + 2] = bytes_to_lanes(q23), a[i + 3] = bytes_to_lanes(_mm_srli_si128(q23, 8));
        a[i + 4] = bytes_to_lanes(q45), a[i + 5] = bytes_to_lanes(_mm_srli_si128(q45, 8));
        a[i + 6] = bytes_to_lanes(q67), a[i + 7] = bytes_to_lanes(_mm_srli_si128(q67, 8));
    }
#endif
    for (; i < n; i++)
        for (int l = 0; l < 8; l++) a[i][l] = img[l * n + i];
}

/* out[l * n + i] = a[from[i]][l] for the first m of the 8 images (values integral, 0..255) */
static void from_lanes(const v8d *a, const long *from, long n, int m, uint8_t *out) {
    long i = 0;
#ifdef BLOCK_TRANSPOSE
    for (; i + 8 <= n; i += 8) {
        __m128i q[8];
        for (int p = 0; p < 8; p++)                       /* position i + p: 8 bytes, low half */
            q[p] = _mm512_cvtepi64_epi8(_mm512_cvttpd_epi64((__m512d)a[from[i + p]]));
        __m512i blk = _mm512_castsi128_si512(_mm_unpacklo_epi64(q[0], q[1]));
        blk = _mm512_inserti64x2(blk, _mm_unpacklo_epi64(q[2], q[3]), 1);
        blk = _mm512_inserti64x2(blk, _mm_unpacklo_epi64(q[4], q[5]), 2);
        blk = _mm512_inserti64x2(blk, _mm_unpacklo_epi64(q[6], q[7]), 3);
        uint8_t img8[64] __attribute__((aligned(64)));    /* 8-byte word l: image l */
        _mm512_store_si512(img8, transpose8x8(blk));
        for (int l = 0; l < m; l++) memcpy(out + l * n + i, img8 + 8 * l, 8);
    }
#endif
    for (; i < n; i++)
        for (int l = 0; l < m; l++) out[l * n + i] = (uint8_t)a[from[i]][l];
}

/* Pillow's BOX resize to (hs, ws) and back to (h, w), each resize horizontal (box_rows) then
 * vertical (box_pass, whole rows at once); down_w (ws, w), down_h (hs, h), up_w (w, ws), up_h
 * (h, hs) are the weight matrices.  No transposes of the images (1.1-1.4x faster than passing
 * along the first axis of transposed copies), the same sums in the same order.  Images go 8 at
 * a time, one per lane; the last group's unused lanes hold zeros and are not written.
 * Upscaling (hs <= h, ws <= w) takes one pixel at weight 1 for each output, so the way back is
 * then a gather from the small image. */
void cc_pixelate(const uint8_t *img, uint8_t *out, long n_img, long h, long w, long hs, long ws,
                 const double *down_w, const double *down_h, const double *up_w,
                 const double *up_h) {
    long n = h * w * 3, row_tap[h], col_tap[w];
    int copy = single_taps(up_w, w, ws, col_tap) && single_taps(up_h, h, hs, row_tap);
    long *from = malloc(n * sizeof(long));                /* output position <- lane position */
    for (long r = 0; r < h; r++)
        for (long c = 0; c < w; c++)
            for (long k = 0; k < 3; k++)
                from[(r * w + c) * 3 + k] = copy ? (row_tap[r] * ws + col_tap[c]) * 3 + k
                                                 : (r * w + c) * 3 + k;
    v8d *a = aligned_alloc(64, n * sizeof(v8d)), *t = aligned_alloc(64, n * sizeof(v8d));
    uint8_t *pad = calloc(8 * n, 1);                      /* the last group, zero-filled */
    for (long b = 0; b < n_img; b += 8) {
        int m = n_img - b < 8 ? (int)(n_img - b) : 8;      /* images in this group */
        const uint8_t *src = img + b * n;
        if (m < 8) src = memcpy(pad, src, m * n);
        to_lanes(src, n, a);
        box_rows(a, t, h, w, ws, down_w);
        box_pass(t, a, h, hs, ws * 3, down_h);                 /* (hs, ws, 3) */
        if (!copy) {
            box_rows(a, t, hs, ws, w, up_w);
            box_pass(t, a, hs, h, w * 3, up_h);
        }
        from_lanes(a, from, n, m, out + b * n);
    }
    free(a), free(t), free(pad), free(from);
}

/* ---- JPEG: digital.py's jpeg_roundtrip (4:2:0, libjpeg's rounding), the 8x8 DCT sums taken
 * in its fixed order: one product at a time, k ascending */

/* out[p] = sum_k s[p][k] v[k] for the 8 rows p: lane-wise products and sums, one at a time in
 * ascending k (vector lanes do the scalar operations, so the order is the fallback's) */
static inline void combine8(const double *restrict s, const v8d *restrict v, v8d *restrict out) {
    for (int p = 0; p < 8; p++) {
        v8d acc = s[p * 8] * v[0];
        for (int k = 1; k < 8; k++) acc += s[p * 8 + k] * v[k];
        out[p] = acc;
    }
}

/* combine8 over the k with use[k] only, from 0: a skipped term is a product with a zero, +-0,
 * which changes no sum (but the sign of a zero, and every sum here later gets 128.5 added) */
static inline void combine8_some(const double *restrict s, const v8d *restrict v,
                                 const int *use, v8d *restrict out) {
    for (int p = 0; p < 8; p++) {
        v8d acc = {0};
        for (int k = 0; k < 8; k++)
            if (use[k]) acc += s[p * 8 + k] * v[k];
        out[p] = acc;
    }
}

/* Every 8x8 block of an (h, w) plane of levels, in place: shift by -128, DCT d X d^T,
 * quantise with q (round half away from zero), dequantise, inverse DCT d^T C d, + 128.5,
 * floor, clamp.  Row k of X d^T is sum_j X[., j] d[., j]: combine8 with X's entries as the
 * scalars and d^T's rows as the vectors.  The inverse skips the all-zero rows and columns of
 * the quantised C (most of them at these qualities). */
static void jpeg_plane(double *plane, long h, long w, const double *q, const v8d *d,
                       const v8d *dt) {
    v8d x[8], t[8], c[8];
    for (long by = 0; by < h; by += 8)
        for (long bx = 0; bx < w; bx += 8) {
            for (int i = 0; i < 8; i++) {
                memcpy(&x[i], plane + (by + i) * w + bx, sizeof(v8d));
                x[i] -= 128;
            }
            combine8((const double *)d, x, t);           /* d X */
            combine8((const double *)t, dt, c);          /* (d X) d^T */
            double *cf = (double *)c;
            for (int i = 0; i < 64; i++) {
                double f = floor(fabs(cf[i]) / q[i] + 0.5) * q[i];
                cf[i] = cf[i] > 0 ? f : (cf[i] < 0 ? -f : 0.0);
            }
            int row_used[8], col_used[8] = {0};
            for (int i = 0; i < 8; i++) {
                row_used[i] = 0;
                for (int j = 0; j < 8; j++) {
                    row_used[i] |= cf[i * 8 + j] != 0;
                    col_used[j] |= cf[i * 8 + j] != 0;
                }
            }
            combine8_some((const double *)dt, c, row_used, t);   /* d^T C */
            combine8_some((const double *)t, d, col_used, x);    /* (d^T C) d */
            for (int i = 0; i < 8; i++) {
                double *row = plane + (by + i) * w + bx;
                for (int j = 0; j < 8; j++) {
                    double v = floor(x[i][j] + 128.5);
                    row[j] = v < 0 ? 0 : (v > 255 ? 255 : v);
                }
            }
        }
}

/* libjpeg's h2v2 fancy upsampling of an (h2, w2) plane to (2 h2, 2 w2), edges replicated;
 * v is scratch of w2 + 2 */
static void fancy_upsample(const double *c, double *out, long h2, long w2, double *v) {
    long w = 2 * w2;
    for (long r = 0; r < 2 * h2; r++) {
        long near = r / 2, far = r % 2 ? (near + 1 < h2 ? near + 1 : near) : (near > 0 ? near - 1 : 0);
        const double *cn = c + near * w2, *cf = c + far * w2;
        double *o = out + r * w;
        for (long q = 0; q < w2; q++) v[q + 1] = 3 * cn[q] + cf[q];
        v[0] = v[1], v[w2 + 1] = v[w2];
        for (long q = 0; q < w2; q++) {
            o[2 * q] = floor((3 * v[q + 1] + v[q] + 8) / 16);
            o[2 * q + 1] = floor((3 * v[q + 1] + v[q + 2] + 7) / 16);
        }
    }
}

/* JPEG round trip of RGB uint8 (h, w, 3) images, h and w multiples of 16; q_luma, q_chroma the
 * quantisation tables, d the orthonormal DCT matrix and dt its transpose (all 8x8, row-major). */
void cc_jpeg(const uint8_t *img, uint8_t *out, long n_img, long h, long w, const double *q_luma,
             const double *q_chroma, const double *d, const double *dt) {
    long hw = h * w, h2 = h / 2, w2 = w / 2;
    v8d dv[8], dtv[8];
    memcpy(dv, d, sizeof dv);
    memcpy(dtv, dt, sizeof dtv);
    double *y = malloc(hw * sizeof(double)), *cb = malloc(hw * sizeof(double)),
           *cr = malloc(hw * sizeof(double)), *sb = malloc(h2 * w2 * sizeof(double)),
           *sr = malloc(h2 * w2 * sizeof(double)), *row = malloc((w2 + 2) * sizeof(double));
    for (long b = 0; b < n_img; b++) {
        const uint8_t *x = img + b * hw * 3;
        for (long p = 0; p < hw; p++) {
            double rp = x[3 * p], gp = x[3 * p + 1], bp = x[3 * p + 2];
            y[p] = floor(0.299 * rp + 0.587 * gp + 0.114 * bp + 0.5);
            cb[p] = floor(-0.168735892 * rp - 0.331264108 * gp + 0.5 * bp + 128 + 0.5 - 1e-9);
            cr[p] = floor(0.5 * rp - 0.418687589 * gp - 0.081312411 * bp + 128 + 0.5 - 1e-9);
        }
        for (long i = 0; i < h2; i++)                 /* 2x2 sums plus libjpeg's bias 1, 2, 1, 2 */
            for (long q = 0; q < w2; q++) {
                long at = 2 * i * w + 2 * q;
                double bias = q % 2 ? 2 : 1;
                sb[i * w2 + q] = floor((cb[at] + cb[at + 1] + cb[at + w] + cb[at + w + 1] + bias) / 4);
                sr[i * w2 + q] = floor((cr[at] + cr[at + 1] + cr[at + w] + cr[at + w + 1] + bias) / 4);
            }
        jpeg_plane(y, h, w, q_luma, dv, dtv);
        jpeg_plane(sb, h2, w2, q_chroma, dv, dtv);
        jpeg_plane(sr, h2, w2, q_chroma, dv, dtv);
        fancy_upsample(sb, cb, h2, w2, row);
        fancy_upsample(sr, cr, h2, w2, row);
        uint8_t *o = out + b * hw * 3;
        for (long p = 0; p < hw; p++) {
            double rp = y[p] + floor(1.402 * (cr[p] - 128) + 0.5);
            double gp = y[p] + floor(-0.344136286 * (cb[p] - 128) - 0.714136286 * (cr[p] - 128) + 0.5);
            double bp = y[p] + floor(1.772 * (cb[p] - 128) + 0.5);
            o[3 * p] = (uint8_t)(rp < 0 ? 0 : (rp > 255 ? 255 : rp));
            o[3 * p + 1] = (uint8_t)(gp < 0 ? 0 : (gp > 255 ? 255 : gp));
            o[3 * p + 2] = (uint8_t)(bp < 0 ? 0 : (bp > 255 ? 255 : bp));
        }
    }
    free(y), free(cb), free(cr), free(sb), free(sr), free(row);
}

/* ---- elastic transform: digital.py's elastic_transform */

static inline long reflect(long i, long n) {     /* scipy's "reflect": b a | a b c | c b */
    if (i >= 0 && i < n) return i;               /* inside: no division */
    long period = 2 * n;
    i %= period;
    if (i < 0) i += period;
    return i < period - 1 - i ? i : period - 1 - i;
}

static inline long fold(long i, long n, int reflected) {
    return reflected ? reflect(i, n) : mirror(i, n);
}

enum { PAD = 8 };   /* border of the padded planes: the warps here move pixels a few pixels */

/* The planar (3, h + 2 PAD, w + 2 PAD) copy of an image, borders folded; src is (h, w, 3)
 * interleaved or (3, h, w) planar.  The rows' middles are copied, their ends folded, then the
 * top and bottom rows copied from the folded rows. */
static void pad_planes(const float *src, int interleaved, long h, long w, int reflected,
                       float *dst) {
    long ph = h + 2 * PAD, pw = w + 2 * PAD;
    for (long c = 0; c < 3; c++) {
        float *plane = dst + c * ph * pw;
        for (long r = 0; r < h; r++) {
            float *d = plane + (r + PAD) * pw + PAD;
            if (interleaved)
                for (long q = 0; q < w; q++) d[q] = src[(r * w + q) * 3 + c];
            else
                memcpy(d, src + (c * h + r) * w, w * sizeof(float));
            for (long q = 1; q <= PAD; q++) {
                d[-q] = d[fold(-q, w, reflected)];
                d[w - 1 + q] = d[fold(w - 1 + q, w, reflected)];
            }
        }
        for (long r = 0; r < PAD; r++) {
            memcpy(plane + r * pw, plane + (fold(r - PAD, h, reflected) + PAD) * pw, pw * sizeof(float));
            long bottom = h + PAD + r;
            memcpy(plane + bottom * pw, plane + (fold(bottom - PAD, h, reflected) + PAD) * pw,
                   pw * sizeof(float));
        }
    }
}

/* filters.bilinear of a padded image (pad_planes) at (rows[i], cols[i]), i < n, into the planar
 * (3, n) out: one branch-free pass when every 2x2 neighbourhood lies in the padded planes (the
 * usual case), else the borders folded sample by sample.  Both read the same values.  wr, wc
 * and at (n each) are scratch. */
static void bilinear_planes(const float *padded, long h, long w, int reflected,
                            const float *rows, const float *cols, long n, float *out, float *wr,
                            float *wc, int *at) {
    long ph = h + 2 * PAD, pw = w + 2 * PAD;
    int inside = 1;
    for (long i = 0; i < n; i++)
        inside &= (rows[i] >= (float)-PAD) & (rows[i] < (float)(h + PAD - 1)) &
                  (cols[i] >= (float)-PAD) & (cols[i] < (float)(w + PAD - 1));
    if (inside) {
        for (long i = 0; i < n; i++) {
            float r0 = floorf(rows[i]), c0 = floorf(cols[i]);
            wr[i] = rows[i] - r0, wc[i] = cols[i] - c0;
            at[i] = ((int)r0 + PAD) * (int)pw + (int)c0 + PAD;
        }
        for (int c = 0; c < 3; c++) {
            const float *pl = padded + c * ph * pw;
            float *o = out + c * n;
            for (long i = 0; i < n; i++) {
                const float *p = pl + at[i];
                float top = p[0] * (1.0f - wc[i]) + p[1] * wc[i];
                float bottom = p[pw] * (1.0f - wc[i]) + p[pw + 1] * wc[i];
                o[i] = top * (1.0f - wr[i]) + bottom * wr[i];
            }
        }
        return;
    }
    for (long i = 0; i < n; i++) {
        float r0 = floorf(rows[i]), c0 = floorf(cols[i]);
        float fr = rows[i] - r0, fc = cols[i] - c0;
        long ir = (long)r0, ic = (long)c0;
        long ra = fold(ir, h, reflected) + PAD, rb = fold(ir + 1, h, reflected) + PAD;
        long ca = fold(ic, w, reflected) + PAD, cb = fold(ic + 1, w, reflected) + PAD;
        for (int c = 0; c < 3; c++) {
            const float *pl = padded + c * ph * pw;
            float top = pl[ra * pw + ca] * (1.0f - fc) + pl[ra * pw + cb] * fc;
            float bottom = pl[rb * pw + ca] * (1.0f - fc) + pl[rb * pw + cb] * fc;
            out[c * n + i] = top * (1.0f - fr) + bottom * fr;
        }
    }
}

/* out[q] = sum_t k[t] rows[t][q] summed from 0 in ascending t, for q < w; 32 lanes at a time
 * (four independent sums in flight), then 8, then one */
static void taps_row(const double *const *rows, const double *k, long taps, long w, double *out) {
    long q = 0;
    for (; q + 32 <= w; q += 32) {
        v8d a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (long t = 0; t < taps; t++) {
            const v8du *s = (const v8du *)(rows[t] + q);
            a0 += k[t] * s[0], a1 += k[t] * s[1], a2 += k[t] * s[2], a3 += k[t] * s[3];
        }
        v8du *o = (v8du *)(out + q);
        o[0] = a0, o[1] = a1, o[2] = a2, o[3] = a3;
    }
    for (; q + 8 <= w; q += 8) {
        v8d acc = {0};
        for (long t = 0; t < taps; t++) acc += k[t] * *(const v8du *)(rows[t] + q);
        *(v8du *)(out + q) = acc;
    }
    for (; q < w; q++) {
        double acc = 0;
        for (long t = 0; t < taps; t++) acc += k[t] * rows[t][q];
        out[q] = acc;
    }
}

/* Gaussian smoothing of an (h, w) double field in place, filters.gaussian_taps' order: the
 * horizontal pass then the vertical one, each summing taps k[0..taps) from 0 one at a time,
 * borders reflected; pad (w + taps), tmp (h * w) and rows (taps pointers) are scratch. */
static void smooth_field(double *f, long h, long w, const double *k, long taps, double *pad,
                         double *tmp, const double **rows) {
    long rad = taps / 2;
    for (long t = 0; t < taps; t++) rows[t] = pad + t;
    for (long r = 0; r < h; r++) {
        for (long q = 0; q < w + 2 * rad; q++) pad[q] = f[r * w + reflect(q - rad, w)];
        taps_row(rows, k, taps, w, tmp + r * w);
    }
    for (long r = 0; r < h; r++) {
        for (long t = 0; t < taps; t++) rows[t] = tmp + reflect(r + t - rad, h) * w;
        taps_row(rows, k, taps, w, f + r * w);
    }
}

/* Affine warp by the inverse matrices m (n_img, 2, 3) float32 (mirrored borders), then the
 * displacement field: uniform(-1, 1) draws (dx field then dy field, from pair counter c0),
 * smoothed with k, times alpha, as float32; bilinear resampling with reflected borders. */
void cc_elastic(const uint8_t *img, uint8_t *out, long n_img, long h, long w, const float *m,
                const uint64_t *index, uint64_t key, uint64_t c0, const double *k, long taps,
                double alpha) {
    long hw = h * w, padded = 3 * (h + 2 * PAD) * (w + 2 * PAD);
    float *x = malloc(hw * 3 * sizeof(float)), *planes = malloc(padded * sizeof(float)),
          *warped = malloc(hw * 3 * sizeof(float)), *u = malloc((2 * hw + 1) * sizeof(float)),
          *sy = malloc(hw * sizeof(float)), *sx = malloc(hw * sizeof(float)),
          *wr = malloc(hw * sizeof(float)), *wc = malloc(hw * sizeof(float));
    int *at = malloc(hw * sizeof(int));
    double *field = malloc(2 * hw * sizeof(double)), *pad = malloc((w + taps) * sizeof(double)),
           *tmp = malloc(hw * sizeof(double));
    const double **rows = malloc(taps * sizeof(double *));
    for (long b = 0; b < n_img; b++) {
        const float *mb = m + 6 * b;
        for (long i = 0; i < hw * 3; i++) x[i] = (float)img[b * hw * 3 + i] / 255.0f;
        pad_planes(x, 1, h, w, 0, planes);
        for (long r = 0; r < h; r++)
            for (long q = 0; q < w; q++) {
                float fq = (float)q, fr = (float)r;
                sx[r * w + q] = (mb[0] * fq + mb[1] * fr) + mb[2];
                sy[r * w + q] = (mb[3] * fq + mb[4] * fr) + mb[5];
            }
        bilinear_planes(planes, h, w, 0, sy, sx, hw, warped, wr, wc, at);
        uniforms(key, index[b], c0, 2 * hw, u);
        for (long i = 0; i < 2 * hw; i++) field[i] = -1.0 + 2.0 * (double)u[i];
        smooth_field(field, h, w, k, taps, pad, tmp, rows);            /* dx */
        smooth_field(field + hw, h, w, k, taps, pad, tmp, rows);       /* dy */
        for (long r = 0; r < h; r++)
            for (long q = 0; q < w; q++) {
                sx[r * w + q] = (float)q + (float)(field[r * w + q] * alpha);
                sy[r * w + q] = (float)r + (float)(field[hw + r * w + q] * alpha);
            }
        pad_planes(warped, 0, h, w, 1, planes);
        bilinear_planes(planes, h, w, 1, sy, sx, hw, x, wr, wc, at);
        uint8_t *o = out + b * hw * 3;
        for (long i = 0; i < hw; i++)
            for (int c = 0; c < 3; c++) o[3 * i + c] = unit_to_u8(x[c * hw + i]);
    }
    free(x), free(planes), free(warped), free(u), free(sy), free(sx), free(field), free(pad);
    free(tmp), free(rows), free(wr), free(wc), free(at);
}

/* ---- snow: weather.py's snow */

/* The snow layer mean + std * normal (h * w draws from pair counter c0), zoomed by the
 * per-axis taps (row_lo, row_hi, row_f), (col_lo, col_hi, col_f) of weather.zoom_taps, zeroed
 * below threshold, as uint8 levels, motion-blurred along (dy, dx) (n_img, taps); the image
 * blended towards its brightened grey, plus the layer and the layer turned by 180 degrees. */
void cc_snow(const uint8_t *img, uint8_t *out, long n_img, long h, long w, const uint64_t *index,
             uint64_t key, uint64_t c0, float mean, float std, const int64_t *row_lo,
             const int64_t *row_hi, const double *row_f, const int64_t *col_lo,
             const int64_t *col_hi, const double *col_f, float threshold, const double *k,
             long taps, const int64_t *dy, const int64_t *dx, float blend, float keep) {
    long hw = h * w;
    float *u = malloc((hw + 1) * sizeof(float)), *layer = malloc(hw * sizeof(float)),
          *snow = malloc(hw * sizeof(float));
    double *levels = malloc(hw * sizeof(double)), *blurred = malloc(hw * sizeof(double));
    long *rows = malloc(h * sizeof(long)), *cols = malloc(w * sizeof(long));
    for (long b = 0; b < n_img; b++) {
        uniforms(key, index[b], c0, hw, u);
        for (long i = 0; i < hw; i++) {
            float wt, z = normal_from_uniform(u[i], &wt);
            if (wt >= 5.0f) z = normal_tail(u[i], wt);
            layer[i] = mean + std * z;
        }
        for (long r = 0; r < h; r++) {
            const float *lo = layer + row_lo[r] * w, *hi = layer + row_hi[r] * w;
            double fy = row_f[r];
            for (long q = 0; q < w; q++) {
                double fx = col_f[q];
                double top = (double)lo[col_lo[q]] * (1.0 - fx) + (double)lo[col_hi[q]] * fx;
                double bottom = (double)hi[col_lo[q]] * (1.0 - fx) + (double)hi[col_hi[q]] * fx;
                float v = (float)(top * (1.0 - fy) + bottom * fy);
                if (v < threshold) v = 0.0f;
                v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
                levels[r * w + q] = (double)floorf(v * 255.0f);
            }
        }
        motion_image(levels, blurred, h, w, 1, k, taps, dy + b * taps, dx + b * taps, rows, cols);
        for (long i = 0; i < hw; i++) snow[i] = (float)blurred[i] / 255.0f;
        const uint8_t *x = img + b * hw * 3;
        uint8_t *o = out + b * hw * 3;
        for (long i = 0; i < hw; i++) {
            float x0 = (float)x[3 * i] / 255.0f, x1 = (float)x[3 * i + 1] / 255.0f,
                  x2 = (float)x[3 * i + 2] / 255.0f;
            float lift = ((x0 * 0.299f + x1 * 0.587f) + x2 * 0.114f) * 1.5f + 0.5f;
            float add = snow[i], add2 = snow[hw - 1 - i];
            float xs[3] = {x0, x1, x2};
            for (int c = 0; c < 3; c++) {
                float v = blend * xs[c] + keep * (xs[c] > lift ? xs[c] : lift);
                o[3 * i + c] = unit_to_u8((v + add) + add2);
            }
        }
    }
    free(u), free(layer), free(snow), free(levels), free(blurred), free(rows), free(cols);
}
