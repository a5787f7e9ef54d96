/* Fused corruption kernels over a batch of uint8 images (N, H, W, C), written as uint8.
 *
 * Each kernel is the same arithmetic, in the same order, as its numpy / PyTorch fallback in
 * noise.py, blur.py, weather.py and digital.py, so that both give the same bytes: the build
 * uses -ffp-contract=off (no fused multiply-adds) and no -ffast-math (no reordering).
 * Random draws are rng.py's counter stream: draw j of image i is a pure function of
 * (key, i, j), so results do not depend on batching.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Standard normal from a uniform in (0, 1): sqrt(2) erfinv(2u - 1), with Giles' single-precision
 * erfinv ("Approximating the erfinv function", GPU Computing Gems, 2011).  This is its central
 * branch, right where *w_out < 5; normal_tail is the other. */
static inline float normal_from_uniform(float u, float *w_out) {
    float x = 2.0f * u - 1.0f;
    float w = -log_pos((1.0f - x) * (1.0f + x));
    float c = w - 2.5f;
    float p = 2.81022636e-08f;
    p = 3.43273939e-07f + p * c;
    p = -3.5233877e-06f + p * c;
    p = -4.39150654e-06f + p * c;
    p = 0.00021858087f + p * c;
    p = -0.00125372503f + p * c;
    p = -0.00417768164f + p * c;
    p = 0.246640727f + p * c;
    p = 1.50140941f + p * c;
    *w_out = w;
    return (p * x) * 1.41421356f;
}

static float normal_tail(float u, float w) {
    float x = 2.0f * u - 1.0f;
    float t = sqrtf(w) - 3.0f;
    float q = -0.000200214257f;
    q = 0.000100950558f + q * t;
    q = 0.00134934322f + q * t;
    q = -0.00367342844f + q * t;
    q = 0.00573950773f + q * t;
    q = -0.0076224613f + q * t;
    q = 0.00943887047f + q * t;
    q = 1.00167406f + q * t;
    q = 2.83297682f + q * t;
    return (q * x) * 1.41421356f;
}

static inline uint8_t unit_to_u8(float v) {      /* clip to [0, 1], scale, truncate */
    v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
    return (uint8_t)(v * 255.0f);
}

/* ---- noise: one draw per value, values in the image's own (H, W, C) order */

enum { GAUSSIAN = 0, SPECKLE = 1, IMPULSE = 2 };

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
                y[i] = unit_to_u8(kind == GAUSSIAN ? v + c * z : v + (v * c) * z);
            }
            for (long i = 0; i < n; i++)
                if (w[i] >= 5.0f) {
                    float z = normal_tail(u[i], w[i]);
                    float v = (float)x[i] / 255.0f;
                    y[i] = unit_to_u8(kind == GAUSSIAN ? v + c * z : v + (v * c) * z);
                }
        }
    }
    free(w);
    free(u);
}

/* Poisson(level / 255 * photons) by inverse CDF: cdf (256, k_max) rows, guide (256, n_guide + 1)
 * the first candidate of each cell of u. */
void cc_shot_noise(const uint8_t *img, uint8_t *out, long n_img, long n, const uint64_t *index,
                   uint64_t key, uint64_t c0, const double *cdf, const int64_t *guide, long k_max,
                   long n_guide, float photons) {
    float *u = malloc((n + 1) * sizeof(float));
    for (long b = 0; b < n_img; b++) {
        const uint8_t *x = img + b * n;
        uint8_t *y = out + b * n;
        uniforms(key, index[b], c0, n, u);
        for (long i = 0; i < n; i++) {
            long level = x[i];
            long at = level * (n_guide + 1) + (long)(u[i] * (float)n_guide);
            int64_t lo = guide[at], hi = guide[at + 1];
            const double *row = cdf + level * k_max;
            /* the first k in [lo, hi] with cdf >= u: what the fallback's bisection finds; a
             * cell is mostly 0-2 values wide: two branch-free steps, then a scan (row[hi] is
             * always inside the row) */
            double ud = (double)u[i];
            lo += (lo < hi) & (row[lo] < ud);
            lo += (lo < hi) & (row[lo] < ud);
            while (lo < hi && row[lo] < ud) lo++;
            y[i] = unit_to_u8((float)lo / photons);
        }
    }
    free(u);
}

/* ---- blur */

static inline long clampi(long i, long n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

static inline long mirror(long i, long n) {      /* OpenCV's BORDER_REFLECT_101 */
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

/* ImageMagick's motion blur on uint8 (h, w, c) images: tap t reads the pixel at (dy, dx)[b, t]
 * (edges repeated), weights k; the sum is rounded half to even. */
void cc_motion_blur(const uint8_t *img, uint8_t *out, long n_img, long h, long w, long c,
                    const double *k, long taps, const int64_t *dy, const int64_t *dx) {
    long n = h * w * c;
    double *src = malloc(n * sizeof(double)), *acc = malloc(n * sizeof(double));
    long *rows = malloc(h * sizeof(long)), *cols = malloc(w * sizeof(long));
    for (long b = 0; b < n_img; b++) {
        for (long i = 0; i < n; i++) src[i] = (double)img[b * n + i];
        memset(acc, 0, n * sizeof(double));
        for (long t = 0; t < taps; t++) {
            long sy = dy[b * taps + t], sx = dx[b * taps + t];
            for (long r = 0; r < h; r++) rows[r] = clampi(r + sy, h);
            for (long q = 0; q < w; q++) cols[q] = clampi(q + sx, w);
            add_shifted(acc, src, h, w, c, rows, cols, sx, k[t]);
        }
        for (long i = 0; i < n; i++) {
            double v = rint(acc[i]);
            out[b * n + i] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
    }
    free(src), free(acc), free(rows), free(cols);
}

/* Correlation of each channel of x / 255 with a (kh, kw) kernel, mirrored borders, taps in
 * row-major order; clipped to [0, 1], times 255, truncated. */
void cc_defocus(const uint8_t *img, uint8_t *out, long n_img, long h, long w, long c,
                const double *kernel, long kh, long kw) {
    long n = h * w * c;
    double *src = malloc(n * sizeof(double)), *acc = malloc(n * sizeof(double));
    long *rows = malloc(h * sizeof(long)), *cols = malloc(w * sizeof(long));
    for (long b = 0; b < n_img; b++) {
        for (long i = 0; i < n; i++) src[i] = (double)img[b * n + i] / 255.0;
        memset(acc, 0, n * sizeof(double));
        for (long i = 0; i < kh; i++) {
            for (long r = 0; r < h; r++) rows[r] = mirror(r + i - kh / 2, h);
            for (long j = 0; j < kw; j++) {
                long sx = j - kw / 2;
                for (long q = 0; q < w; q++) cols[q] = mirror(q + sx, w);
                add_shifted(acc, src, h, w, c, rows, cols, sx, kernel[i * kw + j]);
            }
        }
        for (long i = 0; i < n; i++) {
            double v = acc[i] < 0 ? 0 : (acc[i] > 1 ? 1 : acc[i]);
            out[b * n + i] = (uint8_t)(v * 255.0);
        }
    }
    free(src), free(acc), free(rows), free(cols);
}

/* ---- weather and digital */

/* w_image * x + w_frost * texture crop, clipped to [0, 255]; textures (T, 3, side, side). */
void cc_frost(const uint8_t *restrict img, uint8_t *restrict out, long n_img, long h, long w,
              const double *restrict tex, long side, const int64_t *pick, const int64_t *top,
              const int64_t *left, double w_image, double w_frost) {
    for (long b = 0; b < n_img; b++) {
        const double *t = tex + (pick[b] * 3 * side + top[b]) * side + left[b];
        const uint8_t *x = img + b * h * w * 3;
        uint8_t *y = out + b * h * w * 3;
        for (long r = 0; r < h; r++)
            for (long q = 0; q < w; q++)
                for (long k = 0; k < 3; k++) {
                    long i = (r * w + q) * 3 + k;
                    double v = w_image * (double)x[i] + w_frost * t[(k * side + r) * side + q];
                    y[i] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
                }
    }
}

/* HSV value + c: the pixel scaled by V' / V (a black pixel becomes grey V'). */
void cc_brightness(const uint8_t *restrict img, uint8_t *restrict out, long n_pix, double c) {
    for (long p = 0; p < n_pix; p++) {
        double x0 = (double)img[3 * p] / 255.0, x1 = (double)img[3 * p + 1] / 255.0,
               x2 = (double)img[3 * p + 2] / 255.0;
        double v = x0 > x1 ? x0 : x1;
        v = v > x2 ? v : x2;
        double v2 = v + c;
        v2 = v2 < 0 ? 0 : (v2 > 1 ? 1 : v2);
        double ratio = v2 / (v > 1e-12 ? v : 1e-12);
        double y0 = v > 0 ? x0 * ratio : v2, y1 = v > 0 ? x1 * ratio : v2,
               y2 = v > 0 ? x2 * ratio : v2;
        out[3 * p] = (uint8_t)((y0 < 0 ? 0 : (y0 > 1 ? 1 : y0)) * 255.0);
        out[3 * p + 1] = (uint8_t)((y1 < 0 ? 0 : (y1 > 1 ? 1 : y1)) * 255.0);
        out[3 * p + 2] = (uint8_t)((y2 < 0 ? 0 : (y2 > 1 ? 1 : y2)) * 255.0);
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

/* One Pillow BOX pass along the first axis of src (n_in, len): dst[o] = round(sum of
 * weight[o, j] * src[j] over j with a non-zero weight). */
static void box_pass(const double *restrict src, double *restrict dst, long n_in, long n_out,
                     long len, const double *weight) {
    for (long o = 0; o < n_out; o++) {
        double *d = dst + o * len;
        for (long i = 0; i < len; i++) d[i] = 0;
        for (long j = 0; j < n_in; j++) {
            double wj = weight[o * n_in + j];
            if (wj == 0) continue;
            for (long i = 0; i < len; i++) d[i] += src[j * len + i] * wj;
        }
        /* the weights are non-negative and sum to 1: no clipping needed */
        for (long i = 0; i < len; i++) d[i] = floor(d[i] + 0.5);
    }
}

/* (rows, cols, 3) -> (cols, rows, 3) */
static void swap_axes(const double *restrict src, double *restrict dst, long rows, long cols) {
    for (long r = 0; r < rows; r++)
        for (long q = 0; q < cols; q++)
            for (long k = 0; k < 3; k++) dst[(q * rows + r) * 3 + k] = src[(r * cols + q) * 3 + k];
}

/* Pillow's BOX resize to (hs, ws) and back to (h, w), each resize horizontal then vertical;
 * down_w (ws, w), down_h (hs, h), up_w (w, ws), up_h (h, hs) are the weight matrices.  Every
 * pass runs along the first axis (contiguous rows), the image transposed in between. */
void cc_pixelate(const uint8_t *img, uint8_t *out, long n_img, long h, long w, long hs, long ws,
                 const double *down_w, const double *down_h, const double *up_w,
                 const double *up_h) {
    long n = h * w * 3;
    double *a = malloc(n * sizeof(double)), *t = malloc(n * sizeof(double));
    for (long b = 0; b < n_img; b++) {
        for (long r = 0; r < h; r++)                          /* (w, h, 3) */
            for (long q = 0; q < w; q++)
                for (long k = 0; k < 3; k++) a[(q * h + r) * 3 + k] = img[b * n + (r * w + q) * 3 + k];
        box_pass(a, t, w, ws, h * 3, down_w);                 /* (ws, h, 3) */
        swap_axes(t, a, ws, h);                               /* (h, ws, 3) */
        box_pass(a, t, h, hs, ws * 3, down_h);                /* (hs, ws, 3) */
        swap_axes(t, a, hs, ws);                              /* (ws, hs, 3) */
        box_pass(a, t, ws, w, hs * 3, up_w);                  /* (w, hs, 3) */
        swap_axes(t, a, w, hs);                               /* (hs, w, 3) */
        box_pass(a, t, hs, h, w * 3, up_h);                   /* (h, w, 3) */
        for (long i = 0; i < n; i++) out[b * n + i] = (uint8_t)t[i];
    }
    free(a), free(t);
}
