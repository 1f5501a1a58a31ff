/* Row loops of the scheduler's plugins, compiled: the same integer and floating-point arithmetic
 * as their NumPy forms (toposched.scheduler.rowloops), in one pass over the rows instead of a
 * dozen NumPy calls each allocating and walking an array.
 *
 * Every function takes NumPy arrays through the buffer protocol (no NumPy headers are needed to
 * build this), checks their dimensions, item types and lengths, and raises ValueError on a
 * mismatch; outputs are written in place. Arrays may be strided (the node table's views end at
 * the row count, not at the arrays' capacity); only the last axis must be contiguous.
 *
 * Floating-point results must equal NumPy's bit for bit: this file is compiled with
 * -ffp-contract=off (no fused multiply-add) and never with -ffast-math, and every sum is formed
 * in the order the NumPy form forms it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The loops below are written to vectorise. Baseline x86-64 (SSE2) has no 64-bit integer compare,
 * so each is also compiled for AVX2 and AVX-512, and the loader picks the widest the CPU has
 * (GNU ifunc; NumPy's own loops dispatch the same way). Elsewhere, one build for the target. */
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define ROW_LOOP __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) static
#else
#define ROW_LOOP static
#endif

/* ---- arrays through the buffer protocol -------------------------------------------------- */

typedef struct {
    Py_buffer view;
    int held;
} Array;

static void release(Array *arrays, int count)
{
    for (int i = 0; i < count; i++) {
        if (arrays[i].held) {
            PyBuffer_Release(&arrays[i].view);
            arrays[i].held = 0;
        }
    }
}

/* kind: 'i' int64, 'd' float64, 'b' bool (one byte). */
static int format_matches(const Py_buffer *view, char kind)
{
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    switch (kind) {
    case 'i':
        return view->itemsize == 8 && (strcmp(f, "l") == 0 || strcmp(f, "q") == 0);
    case 'd':
        return view->itemsize == 8 && strcmp(f, "d") == 0;
    case 'b':
        return view->itemsize == 1 && (strcmp(f, "?") == 0 || strcmp(f, "b") == 0 || strcmp(f, "B") == 0);
    }
    return 0;
}

/* Takes `obj` as an array of `ndim` dimensions of `kind`, its last axis contiguous unless any_stride. */
static int take_strided(PyObject *obj, Array *out, int ndim, char kind, int writable, int any_stride, const char *name)
{
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &out->view, flags) < 0)
        return -1;
    out->held = 1;
    const Py_buffer *v = &out->view;
    if (v->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s: %d dimensions, expected %d", name, v->ndim, ndim);
        return -1;
    }
    if (!format_matches(v, kind)) {
        PyErr_Format(PyExc_ValueError, "%s: item type %s of %zd bytes is not the expected one", name,
                     v->format ? v->format : "B", v->itemsize);
        return -1;
    }
    if (!any_stride && ndim > 0 && v->shape[ndim - 1] > 1 && v->strides[ndim - 1] != v->itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: its last axis is not contiguous", name);
        return -1;
    }
    return 0;
}

static int take_array(PyObject *obj, Array *out, int ndim, char kind, int writable, const char *name)
{
    return take_strided(obj, out, ndim, kind, writable, 0, name);
}

static inline const char *at2(const Py_buffer *v, Py_ssize_t i)
{
    return (const char *)v->buf + i * v->strides[0];
}

static inline const char *at3(const Py_buffer *v, Py_ssize_t i, Py_ssize_t j)
{
    return (const char *)v->buf + i * v->strides[0] + j * v->strides[1];
}

static int expect(int ok, const char *what)
{
    if (!ok)
        PyErr_Format(PyExc_ValueError, "array shapes disagree: %s", what);
    return ok;
}

/* ---- sequences of arrays, and amounts that are a number or one per row ------------------------ */

#define MAX_ARRAYS 64

/* Takes each item of the sequence `seq` as an array (see take_array) into arrays[0..*count). */
static int take_arrays(PyObject *seq, Array *arrays, Py_ssize_t *count, int ndim, char kind, int any_stride,
                       const char *name)
{
    PyObject *fast = PySequence_Fast(seq, name);
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > MAX_ARRAYS) {
        PyErr_Format(PyExc_ValueError, "%s: %zd arrays, at most %d", name, n, MAX_ARRAYS);
        Py_DECREF(fast);
        return -1;
    }
    *count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (take_strided(PySequence_Fast_GET_ITEM(fast, i), &arrays[i], ndim, kind, 0, any_stride, name) < 0) {
            *count = i + 1;
            Py_DECREF(fast);
            return -1;
        }
    }
    *count = n;
    Py_DECREF(fast);
    return 0;
}

/* An amount per row: one number for every row (scalar) or an int64 array over the rows. */
typedef struct {
    int64_t scalar;
    const int64_t *per_row;
} Amount;

static int take_amounts(PyObject *seq, Amount *amounts, Array *arrays, Py_ssize_t *count, const char *name)
{
    PyObject *fast = PySequence_Fast(seq, name);
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > MAX_ARRAYS) {
        PyErr_Format(PyExc_ValueError, "%s: %zd amounts, at most %d", name, n, MAX_ARRAYS);
        Py_DECREF(fast);
        return -1;
    }
    *count = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        amounts[i].per_row = NULL;
        amounts[i].scalar = 0;
        if (PyLong_Check(item)) {
            amounts[i].scalar = PyLong_AsLongLong(item);
            if (amounts[i].scalar == -1 && PyErr_Occurred()) {
                Py_DECREF(fast);
                return -1;
            }
        } else {
            if (take_array(item, &arrays[i], 1, 'i', 0, name) < 0) {
                Py_DECREF(fast);
                return -1;
            }
            amounts[i].per_row = (const int64_t *)arrays[i].view.buf;
        }
    }
    Py_DECREF(fast);
    return 0;
}

static inline int64_t amount(const Amount *a, Py_ssize_t row)
{
    return a->per_row ? a->per_row[row] : a->scalar;
}

/* ---- the vectorised loops ----------------------------------------------------------------------- */

ROW_LOOP void fill_int64(int64_t *out, int64_t value, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++)
        out[j] = value;
}

/* fits[j] &= free[j] >= need (need_rows[j] where given). */
ROW_LOOP void mask_at_least(unsigned char *fits, const int64_t *free, const int64_t *need_rows, int64_t need, Py_ssize_t rows)
{
    if (need_rows) {
        for (Py_ssize_t j = 0; j < rows; j++)
            fits[j] &= free[j] >= need_rows[j];
    } else {
        for (Py_ssize_t j = 0; j < rows; j++)
            fits[j] &= free[j] >= need;
    }
}

ROW_LOOP void mark_first(int64_t *first, const unsigned char *fits, int64_t zone, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++)
        first[j] = fits[j] ? zone : first[j];
}

/* One shape's term of ScarcityScore's loss: loss[j] (+)= (before - held after the pod) * value. */
ROW_LOOP void scarcity_term(double *loss, int first_term, const int64_t *q0, const int64_t *q1, const int64_t *r0,
                            const int64_t *r1, const int64_t *tot, const int64_t *bef, int64_t tq0, int64_t tq1,
                            int64_t tr0, int64_t tr1, double value, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++) {
        int64_t h0 = q0[j] - tq0 + ((r0[j] - tr0) >> 63);
        int64_t h1 = q1[j] - tq1 + ((r1[j] - tr1) >> 63);
        int64_t held = h0 < h1 ? h0 : h1;
        held = held < tot[j] ? held : tot[j];
        held = held > 0 ? held : 0;
        double lost = (double)(bef[j] - held) * value;
        loss[j] = first_term ? lost : loss[j] + lost;
    }
}

/* The fit score's term of one resource, by float division: every numerator and divisor below 2**52. */
ROW_LOOP void fit_term_float(int64_t *total, int most, const int64_t *v, const int64_t *alloc, int64_t want,
                             int64_t weight, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++) {
        int64_t per = most ? (v[j] + want < alloc[j] ? v[j] + want : alloc[j]) : v[j] - want;
        per = per > 0 ? per * 100 : 0;
        double d = (double)(alloc[j] > 1 ? alloc[j] : 1);
        total[j] += (int64_t)floor((double)per / d) * weight;
    }
}

/* ---- zones holding a request ------------------------------------------------------------------ */

/* An optional index array (None: every row in order), checked against the rows it indexes. */
static int take_index(PyObject *obj, Array *out, const int64_t **index, Py_ssize_t *count, Py_ssize_t size, const char *name)
{
    *index = NULL;
    if (obj == Py_None)
        return 0;
    if (take_array(obj, out, 1, 'i', 0, name) < 0)
        return -1;
    *index = (const int64_t *)out->view.buf;
    *count = out->view.shape[0];
    for (Py_ssize_t j = 0; j < *count; j++) {
        if ((*index)[j] < 0 || (*index)[j] >= size) {
            PyErr_Format(PyExc_ValueError, "%s: row %lld is not among the %zd rows", name, (long long)(*index)[j], size);
            return -1;
        }
    }
    return 0;
}

ROW_LOOP void gather_flags(unsigned char *dst, const unsigned char *src, const int64_t *index, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++)
        dst[j] = src[index[j]];
}

ROW_LOOP void gather_int64(int64_t *dst, const int64_t *src, const int64_t *index, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++)
        dst[j] = src[index[j]];
}

/* fits[j] &= free[index[j]] >= need (need_rows[j] where given). */
ROW_LOOP void mask_at_least_at(unsigned char *fits, const int64_t *free, const int64_t *index, const int64_t *need_rows,
                               int64_t need, Py_ssize_t n)
{
    if (need_rows) {
        for (Py_ssize_t j = 0; j < n; j++)
            fits[j] &= free[index[j]] >= need_rows[j];
    } else {
        for (Py_ssize_t j = 0; j < n; j++)
            fits[j] &= free[index[j]] >= need;
    }
}

PyDoc_STRVAR(first_zone_holding_doc,
"first_zone_holding(valid, frees, needs, out, rows=None)\n\n"
"Per asked row, the first zone slot that is valid and holds every need: frees[r][zone, row] >= needs[r]\n"
"(a need is a number, or an int64 array with one value per asked row); the zone count where none does.\n"
"valid is zones x rows (bool), each of frees zones x rows (int64); rows the asked rows (int64), None for\n"
"every row in order; out one int64 per asked row.");

static PyObject *first_zone_holding(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "first_zone_holding takes valid, frees, needs, out and rows");
        return NULL;
    }
    Array valid = {{0}}, out = {{0}}, index_array = {{0}}, frees[MAX_ARRAYS] = {{{0}}}, need_arrays[MAX_ARRAYS] = {{{0}}};
    Amount needs[MAX_ARRAYS];
    Py_ssize_t n_frees = 0, n_needs = 0;
    const int64_t *index = NULL;
    unsigned char *fits = NULL;
    PyObject *result = NULL;
    if (take_strided(args[0], &valid, 2, 'b', 0, 1, "valid") < 0 || take_array(args[3], &out, 1, 'i', 1, "out") < 0
        || take_arrays(args[1], frees, &n_frees, 2, 'i', 1, "frees") < 0
        || take_amounts(args[2], needs, need_arrays, &n_needs, "needs") < 0)
        goto done;
    const Py_ssize_t zones = valid.view.shape[0], size = valid.view.shape[1];
    Py_ssize_t n = size;
    if (take_index(nargs == 5 ? args[4] : Py_None, &index_array, &index, &n, size, "rows") < 0)
        goto done;
    if (!expect(n_frees == n_needs, "as many needs as frees") || !expect(out.view.shape[0] == n, "out and the asked rows"))
        goto done;
    for (Py_ssize_t r = 0; r < n_frees; r++) {
        if (!expect(frees[r].view.shape[0] == zones && frees[r].view.shape[1] == size, "frees and valid")
            || !expect(!needs[r].per_row || need_arrays[r].view.shape[0] == n, "needs and the asked rows"))
            goto done;
    }
    int64_t *first = (int64_t *)out.view.buf;
    int contiguous = valid.view.strides[1] == 1 || size < 2;
    for (Py_ssize_t r = 0; r < n_frees; r++)
        contiguous &= frees[r].view.strides[1] == 8 || size < 2;
    if (!contiguous) {
        /* Gathered zones x rows blocks (fancy indexing lays them out rows-major): read through both strides. */
        for (Py_ssize_t j = 0; j < n; j++) {
            const Py_ssize_t row = index ? index[j] : j;
            Py_ssize_t z = 0;
            for (; z < zones; z++) {
                if (!*((const unsigned char *)valid.view.buf + z * valid.view.strides[0] + row * valid.view.strides[1]))
                    continue;
                Py_ssize_t r = 0;
                for (; r < n_frees; r++)
                    if (*(const int64_t *)((const char *)frees[r].view.buf + z * frees[r].view.strides[0]
                                           + row * frees[r].view.strides[1]) < amount(&needs[r], j))
                        break;
                if (r == n_frees)
                    break;
            }
            first[j] = z;
        }
    } else {
        /* Zone by zone, from the last: a row's first holding zone is the last one written. */
        fits = PyMem_Malloc((size_t)(n > 0 ? n : 1));
        if (fits == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        fill_int64(first, zones, n);
        for (Py_ssize_t z = zones - 1; z >= 0; z--) {
            const unsigned char *flags = (const unsigned char *)at2(&valid.view, z);
            if (index)
                gather_flags(fits, flags, index, n);
            else
                memcpy(fits, flags, (size_t)n);
            for (Py_ssize_t r = 0; r < n_frees; r++) {
                const int64_t *free = (const int64_t *)at2(&frees[r].view, z);
                if (index)
                    mask_at_least_at(fits, free, index, needs[r].per_row, needs[r].scalar, n);
                else
                    mask_at_least(fits, free, needs[r].per_row, needs[r].scalar, n);
            }
            mark_first(first, fits, z, n);
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(fits);
    release(&valid, 1);
    release(&out, 1);
    release(&index_array, 1);
    release(frees, (int)n_frees);
    release(need_arrays, (int)n_needs);
    return result;
}

/* ---- NodeResourcesFit --------------------------------------------------------------------------- */

ROW_LOOP void mark_short(int64_t *pattern, const int64_t *a, int64_t least, int bit, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++)
        pattern[j] |= (int64_t)(a[j] < least) << bit;
}

PyDoc_STRVAR(short_bits_doc,
"short_bits(arrays, least, out, rows=None)\n\n"
"Per asked row, one bit per array, set where arrays[r][row] < least[r] (bit r; arrays int64 over the rows,\n"
"least numbers, at most 63 arrays); out int64 per asked row, 0 where the row has every least amount.\n"
"rows: the asked rows (int64), None for every row in order.");

static PyObject *short_bits(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "short_bits takes arrays, least, out and rows");
        return NULL;
    }
    Array out = {{0}}, index_array = {{0}}, arrays[MAX_ARRAYS] = {{{0}}}, unused[MAX_ARRAYS] = {{{0}}};
    Amount least[MAX_ARRAYS];
    Py_ssize_t n_arrays = 0, n_least = 0;
    const int64_t *index = NULL;
    int64_t *gathered = NULL;
    PyObject *result = NULL;
    if (take_array(args[2], &out, 1, 'i', 1, "out") < 0 || take_arrays(args[0], arrays, &n_arrays, 1, 'i', 0, "arrays") < 0
        || take_amounts(args[1], least, unused, &n_least, "least") < 0)
        goto done;
    if (!expect(n_arrays == n_least && n_arrays <= 63 && n_arrays > 0, "as many least amounts as arrays, 1 to 63"))
        goto done;
    const Py_ssize_t size = arrays[0].view.shape[0];
    Py_ssize_t n = size;
    if (take_index(nargs == 4 ? args[3] : Py_None, &index_array, &index, &n, size, "rows") < 0)
        goto done;
    if (!expect(out.view.shape[0] == n, "out and the asked rows"))
        goto done;
    for (Py_ssize_t r = 0; r < n_arrays; r++)
        if (!expect(arrays[r].view.shape[0] == size && !least[r].per_row, "arrays of one length (least: numbers)"))
            goto done;
    if (index && (gathered = PyMem_Malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *pattern = (int64_t *)out.view.buf;
    fill_int64(pattern, 0, n);
    for (Py_ssize_t r = 0; r < n_arrays; r++) {
        const int64_t *a = (const int64_t *)arrays[r].view.buf;
        if (index) {
            gather_int64(gathered, a, index, n);
            a = gathered;
        }
        mark_short(pattern, a, least[r].scalar, (int)r, n);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(gathered);
    release(&out, 1);
    release(&index_array, 1);
    release(arrays, (int)n_arrays);
    release(unused, (int)n_least);
    return result;
}

/* floor(n / d) for 0 <= n and 1 <= d: by a float division where both are below 2**52 (exact there,
 * see basic._floor_divide), by an integer one beyond. */
static inline int64_t floor_quotient(int64_t n, int64_t d)
{
    if (n < 4503599627370496LL && d < 4503599627370496LL)
        return (int64_t)floor((double)n / (double)d);
    return n / d;
}

ROW_LOOP int64_t largest(const int64_t *v, Py_ssize_t rows)
{
    int64_t most = 1;
    for (Py_ssize_t j = 0; j < rows; j++)
        most = v[j] > most ? v[j] : most;
    return most;
}

/* Whether every numerator (at most 100 times the larger of the allocatable and, for LeastAllocated, the
 * free amount) and divisor is below 2**52, so that fit_term_float's division is exact. */
static int float_exact(const int64_t *v, const int64_t *alloc, int most, Py_ssize_t rows)
{
    int64_t bound = largest(alloc, rows);
    if (!most) {
        int64_t free_most = largest(v, rows);
        bound = free_most > bound ? free_most : bound;
    }
    return bound < 4503599627370496LL / 100;
}

PyDoc_STRVAR(fit_score_doc,
"fit_score(most, used_or_free, allocs, wants, weights, out, rows=None)\n\n"
"NodeResourcesFit's LeastAllocated (most false: used_or_free are the free amounts) or MostAllocated\n"
"(most true: the requested amounts) score per row, in upstream's integer arithmetic: per resource\n"
"max(free - want, 0) * 100 // max(alloc, 1), or max(min(requested + want, alloc), 0) * 100 // max(alloc, 1),\n"
"times its weight, summed, integer-divided by the weights' sum. Arrays int64 over the rows; out one\n"
"int64 per asked row; rows the asked rows (int64), None for every row in order.");

static PyObject *fit_score(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "fit_score takes most, used_or_free, allocs, wants, weights, out and rows");
        return NULL;
    }
    Array out = {{0}}, index_array = {{0}}, values[MAX_ARRAYS] = {{{0}}}, allocs[MAX_ARRAYS] = {{{0}}};
    Array unused_w[MAX_ARRAYS] = {{{0}}}, unused_k[MAX_ARRAYS] = {{{0}}};
    Amount wants[MAX_ARRAYS], weights[MAX_ARRAYS];
    Py_ssize_t n_values = 0, n_allocs = 0, n_wants = 0, n_weights = 0;
    const int64_t *index = NULL;
    int64_t *gathered = NULL;
    PyObject *result = NULL;
    int most = PyObject_IsTrue(args[0]);
    if (most < 0 || take_array(args[5], &out, 1, 'i', 1, "out") < 0
        || take_arrays(args[1], values, &n_values, 1, 'i', 0, "used_or_free") < 0
        || take_arrays(args[2], allocs, &n_allocs, 1, 'i', 0, "allocs") < 0
        || take_amounts(args[3], wants, unused_w, &n_wants, "wants") < 0
        || take_amounts(args[4], weights, unused_k, &n_weights, "weights") < 0)
        goto done;
    if (!expect(n_values == n_allocs && n_values == n_wants && n_values == n_weights && n_values > 0,
                "one array, allocatable, want and weight per resource"))
        goto done;
    const Py_ssize_t size = values[0].view.shape[0];
    Py_ssize_t n = size;
    if (take_index(nargs == 7 ? args[6] : Py_None, &index_array, &index, &n, size, "rows") < 0)
        goto done;
    if (!expect(out.view.shape[0] == n, "out and the asked rows"))
        goto done;
    int64_t weight_sum = 0;
    for (Py_ssize_t r = 0; r < n_values; r++) {
        if (!expect(values[r].view.shape[0] == size && allocs[r].view.shape[0] == size, "arrays of one length")
            || !expect(!wants[r].per_row && !weights[r].per_row && weights[r].scalar > 0, "wants and weights: numbers, weights positive"))
            goto done;
        weight_sum += weights[r].scalar;
    }
    if (index && (gathered = PyMem_Malloc(2 * sizeof(int64_t) * (size_t)(n > 0 ? n : 1))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *total = (int64_t *)out.view.buf;
    fill_int64(total, 0, n);
    for (Py_ssize_t r = 0; r < n_values; r++) {
        const int64_t *v = (const int64_t *)values[r].view.buf, *alloc = (const int64_t *)allocs[r].view.buf;
        if (index) {
            gather_int64(gathered, v, index, n);
            gather_int64(gathered + n, alloc, index, n);
            v = gathered;
            alloc = gathered + n;
        }
        const int64_t want = wants[r].scalar, weight = weights[r].scalar;
        if (float_exact(v, alloc, most, n)) {
            fit_term_float(total, most, v, alloc, want, weight, n);
            continue;
        }
        for (Py_ssize_t j = 0; j < n; j++) {
            int64_t per = most ? (v[j] + want < alloc[j] ? v[j] + want : alloc[j]) : v[j] - want;
            per = per > 0 ? per * 100 : 0;
            total[j] += floor_quotient(per, alloc[j] > 1 ? alloc[j] : 1) * weight;
        }
    }
    for (Py_ssize_t j = 0; j < n; j++)
        total[j] /= weight_sum; /* never negative: a floor division */
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(gathered);
    release(&out, 1);
    release(&index_array, 1);
    release(values, (int)n_values);
    release(allocs, (int)n_allocs);
    release(unused_w, (int)n_wants);
    release(unused_k, (int)n_weights);
    return result;
}

/* ---- ScarcityScore ------------------------------------------------------------------------- */

#define TWO_POW_52 4503599627370496.0

/* x rounded to the nearest integer, ties to even (np.round / np.rint), for x >= 0. */
static inline int64_t round_half_even(double x)
{
    if (x < TWO_POW_52) {
        double shifted = x + TWO_POW_52; /* below 2**53 the sum has no fraction: the addition rounds */
        return (int64_t)(shifted - TWO_POW_52);
    }
    return (int64_t)nearbyint(x);
}

PyDoc_STRVAR(scarcity_loss_doc,
"scarcity_loss(before, quot, rem, after_totals, take_q, take_r, value, able, out)\n\n"
"ScarcityScore's raw score per row, written into out (int64, rows):\n"
"held = max(min(quot[0] - take_q[0] - (rem[0] < take_r[0]), quot[1] - take_q[1] - (rem[1] < take_r[1]),\n"
"after_totals), 0) per shape; loss = sum over shapes in order of (before - held) * value;\n"
"out = round(max(loss, 0) * 1e6) where able, else 0.\n"
"Shapes: before, after_totals (shapes x rows); quot, rem (2 x shapes x rows); take_q, take_r (2 x shapes);\n"
"value (shapes, float64); able (rows, bool).");

static PyObject *scarcity_loss(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "scarcity_loss takes 9 arrays");
        return NULL;
    }
    Array a[9] = {{{0}}};
    static const char *names[9] = {"before", "quot", "rem", "after_totals", "take_q", "take_r", "value", "able", "out"};
    static const int dims[9] = {2, 3, 3, 2, 2, 2, 1, 1, 1};
    static const char kinds[9] = {'i', 'i', 'i', 'i', 'i', 'i', 'd', 'b', 'i'};
    double *loss = NULL;
    for (int i = 0; i < 9; i++)
        if (take_array(args[i], &a[i], dims[i], kinds[i], i == 8, names[i]) < 0)
            goto fail;
    const Py_buffer *before = &a[0].view, *quot = &a[1].view, *rem = &a[2].view, *after_totals = &a[3].view;
    const Py_buffer *take_q = &a[4].view, *take_r = &a[5].view, *value = &a[6].view, *able = &a[7].view;
    Py_buffer *out = &a[8].view;
    const Py_ssize_t shapes = before->shape[0], rows = before->shape[1];
    if (!expect(after_totals->shape[0] == shapes && after_totals->shape[1] == rows, "after_totals and before")
        || !expect(quot->shape[0] == 2 && quot->shape[1] == shapes && quot->shape[2] == rows, "quot and before")
        || !expect(rem->shape[0] == 2 && rem->shape[1] == shapes && rem->shape[2] == rows, "rem and before")
        || !expect(take_q->shape[0] == 2 && take_q->shape[1] == shapes, "take_q and before")
        || !expect(take_r->shape[0] == 2 && take_r->shape[1] == shapes, "take_r and before")
        || !expect(value->shape[0] == shapes, "value and before")
        || !expect(able->shape[0] == rows && out->shape[0] == rows, "able, out and before"))
        goto fail;
    if (rows == 0) {
        release(a, 9);
        Py_RETURN_NONE;
    }
    loss = PyMem_Malloc(sizeof(double) * (size_t)rows);
    if (loss == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < shapes; k++) {
        const int64_t *q0 = (const int64_t *)at3(quot, 0, k), *q1 = (const int64_t *)at3(quot, 1, k);
        const int64_t *r0 = (const int64_t *)at3(rem, 0, k), *r1 = (const int64_t *)at3(rem, 1, k);
        const int64_t *tot = (const int64_t *)at2(after_totals, k), *bef = (const int64_t *)at2(before, k);
        const int64_t tq0 = *(const int64_t *)at3(take_q, 0, k), tq1 = *(const int64_t *)at3(take_q, 1, k);
        const int64_t tr0 = *(const int64_t *)at3(take_r, 0, k), tr1 = *(const int64_t *)at3(take_r, 1, k);
        const double v = *(const double *)((const char *)value->buf + k * value->strides[0]);
        scarcity_term(loss, k == 0, q0, q1, r0, r1, tot, bef, tq0, tq1, tr0, tr1, v, rows);
    }
    const unsigned char *ok = (const unsigned char *)able->buf;
    int64_t *dst = (int64_t *)out->buf;
    if (shapes == 0)
        memset(loss, 0, sizeof(double) * (size_t)rows);
    for (Py_ssize_t j = 0; j < rows; j++) {
        double x = loss[j] > 0.0 ? loss[j] * 1e6 : 0.0;
        dst[j] = ok[j] ? round_half_even(x) : 0;
    }
    PyMem_Free(loss);
    release(a, 9);
    Py_RETURN_NONE;
fail:
    PyMem_Free(loss);
    release(a, 9);
    return NULL;
}

/* a // b as Python and NumPy floor it (0 for b == 0, as NumPy's integer division gives). */
static inline int64_t floor_div(int64_t a, int64_t b)
{
    if (b == 0)
        return 0;
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

#define NO_LIMIT INT64_MAX

PyDoc_STRVAR(scarcity_rows_doc,
"scarcity_rows(rows, zfree, zvalid, able, free, union, cm, need, ignored, need_cm, totals, free_cm, holds, quot, rem)\n\n"
"ScarcityScore's kept arrays brought up to date at the given rows. Per row r (able[i] for rows[i]):\n"
"totals[k, r] = sum over valid zones z of min over columns u not ignored[k, u] of zfree[union[u], z, r] // need[k, u]\n"
"(a zone counts where zvalid[z, r] and able); free_cm[c, r] = max(free[cm[c], r], 0); quot[c, k, r], rem[c, k, r] =\n"
"divmod(free_cm[c, r], need_cm[c, k]); holds[k, r] = min(totals[k, r], quot[0, k, r], quot[1, k, r]).\n"
"zfree: columns x zones x rows; zvalid: zones x rows (bool); free: resources x rows; union, cm: int64 indexes.");

static PyObject *scarcity_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "scarcity_rows takes 15 arrays");
        return NULL;
    }
    Array a[15] = {{{0}}};
    static const char *names[15] = {"rows", "zfree", "zvalid", "able", "free", "union", "cm", "need", "ignored",
                                    "need_cm", "totals", "free_cm", "holds", "quot", "rem"};
    static const int dims[15] = {1, 3, 2, 1, 2, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3};
    static const char kinds[15] = {'i', 'i', 'b', 'b', 'i', 'i', 'i', 'i', 'b', 'i', 'i', 'i', 'i', 'i', 'i'};
    for (int i = 0; i < 15; i++)
        if (take_strided(args[i], &a[i], dims[i], kinds[i], i >= 10, 1, names[i]) < 0)
            goto fail;
    const Py_buffer *rows = &a[0].view, *zfree = &a[1].view, *zvalid = &a[2].view, *able = &a[3].view;
    const Py_buffer *free = &a[4].view, *uni = &a[5].view, *cm = &a[6].view, *need = &a[7].view;
    const Py_buffer *ignored = &a[8].view, *need_cm = &a[9].view;
    const Py_buffer *totals = &a[10].view, *free_cm = &a[11].view, *holds = &a[12].view, *quot = &a[13].view,
                    *rem = &a[14].view;
    const Py_ssize_t n = rows->shape[0], zones = zvalid->shape[0], size = zvalid->shape[1];
    const Py_ssize_t shapes = need->shape[0], columns = need->shape[1], kept = totals->shape[1];
    if (!expect(zfree->shape[1] == zones && zfree->shape[2] == size, "zfree and zvalid")
        || !expect(able->shape[0] == n, "able and rows") || !expect(free->shape[1] == size, "free and zvalid")
        || !expect(uni->shape[0] == columns && ignored->shape[0] == shapes && ignored->shape[1] == columns,
                   "union, need and ignored")
        || !expect(cm->shape[0] == 2 && need_cm->shape[0] == 2 && need_cm->shape[1] == shapes, "cm and need_cm")
        || !expect(totals->shape[0] == shapes && holds->shape[0] == shapes && holds->shape[1] == kept
                   && free_cm->shape[0] == 2 && free_cm->shape[1] == kept, "the kept arrays")
        || !expect(quot->shape[0] == 2 && quot->shape[1] == shapes && quot->shape[2] == kept && rem->shape[0] == 2
                   && rem->shape[1] == shapes && rem->shape[2] == kept, "the kept quotients"))
        goto fail;
    for (Py_ssize_t u = 0; u < columns; u++) {
        int64_t c = *(const int64_t *)((const char *)uni->buf + u * uni->strides[0]);
        if (!expect(c >= 0 && c < zfree->shape[0], "a union column within zfree"))
            goto fail;
    }
    for (Py_ssize_t c = 0; c < 2; c++) {
        int64_t col = *(const int64_t *)((const char *)cm->buf + c * cm->strides[0]);
        if (!expect(col >= 0 && col < free->shape[0], "cm within free"))
            goto fail;
    }
#define EL2(v, i, j) (*(int64_t *)((char *)(v)->buf + (i) * (v)->strides[0] + (j) * (v)->strides[1]))
#define EL3(v, i, j, k) (*(int64_t *)((char *)(v)->buf + (i) * (v)->strides[0] + (j) * (v)->strides[1] + (k) * (v)->strides[2]))
#define B2(v, i, j) (*((const unsigned char *)(v)->buf + (i) * (v)->strides[0] + (j) * (v)->strides[1]))
    for (Py_ssize_t i = 0; i < n; i++) { /* all checked before any is written */
        const int64_t r = *(const int64_t *)((const char *)rows->buf + i * rows->strides[0]);
        if (!expect(r >= 0 && r < size && r < kept, "rows within the table and the kept arrays"))
            goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t r = *(const int64_t *)((const char *)rows->buf + i * rows->strides[0]);
        const int row_able = *((const unsigned char *)able->buf + i * able->strides[0]) != 0;
        for (Py_ssize_t k = 0; k < shapes; k++) {
            int64_t total = 0;
            for (Py_ssize_t z = 0; z < zones && row_able; z++) {
                if (!B2(zvalid, z, r))
                    continue;
                int64_t fewest = NO_LIMIT;
                for (Py_ssize_t u = 0; u < columns; u++) {
                    if (B2(ignored, k, u))
                        continue;
                    int64_t c = *(const int64_t *)((const char *)uni->buf + u * uni->strides[0]);
                    int64_t pods = floor_div(EL3(zfree, c, z, r), EL2(need, k, u));
                    fewest = pods < fewest ? pods : fewest;
                }
                total += fewest;
            }
            EL2(totals, k, r) = total;
        }
        for (Py_ssize_t c = 0; c < 2; c++) {
            int64_t col = *(const int64_t *)((const char *)cm->buf + c * cm->strides[0]);
            int64_t f = EL2(free, col, r);
            EL2(free_cm, c, r) = f > 0 ? f : 0;
        }
        for (Py_ssize_t k = 0; k < shapes; k++) {
            int64_t held = EL2(totals, k, r);
            for (Py_ssize_t c = 0; c < 2; c++) {
                int64_t f = EL2(free_cm, c, r), d = EL2(need_cm, c, k);
                int64_t q = floor_div(f, d);
                EL3(quot, c, k, r) = q;
                EL3(rem, c, k, r) = f - q * d;
                held = q < held ? q : held;
            }
            EL2(holds, k, r) = held;
        }
    }
#undef EL2
#undef EL3
#undef B2
    release(a, 15);
    Py_RETURN_NONE;
fail:
    release(a, 15);
    return NULL;
}

PyDoc_STRVAR(scarcity_zone_totals_doc,
"scarcity_zone_totals(totals, zfree, union, need, ignored, taken, firsts, able, out, rows=None)\n\n"
"Per target shape k and asked row j (row = rows[j], or j): where able[j] and firsts[j] is a zone slot z,\n"
"out[k, j] = totals[k, j] - (min over columns u not ignored[k, u] of zfree[union[u], z, row] // need[k, u]\n"
"- the same of (zfree[union[u], z, row] - taken[u])); elsewhere totals[k, j].\n"
"totals, out: shapes x asked rows; zfree: columns x zones x rows; need, ignored: shapes x len(union);\n"
"taken: one int64 per union column; firsts: int64 and able: bool per asked row.");

static PyObject *scarcity_zone_totals(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "scarcity_zone_totals takes 9 arrays and the asked rows");
        return NULL;
    }
    Array a[9] = {{{0}}}, index_array = {{0}};
    static const char *names[9] = {"totals", "zfree", "union", "need", "ignored", "taken", "firsts", "able", "out"};
    static const int dims[9] = {2, 3, 1, 2, 2, 1, 1, 1, 2};
    static const char kinds[9] = {'i', 'i', 'i', 'i', 'b', 'i', 'i', 'b', 'i'};
    const int64_t *index = NULL;
    for (int i = 0; i < 9; i++)
        if (take_strided(args[i], &a[i], dims[i], kinds[i], i == 8, 1, names[i]) < 0)
            goto fail;
    const Py_buffer *totals = &a[0].view, *zfree = &a[1].view, *uni = &a[2].view, *need = &a[3].view;
    const Py_buffer *ignored = &a[4].view, *taken = &a[5].view, *firsts = &a[6].view, *able = &a[7].view;
    Py_buffer *out = &a[8].view;
    const Py_ssize_t shapes = totals->shape[0], zones = zfree->shape[1], size = zfree->shape[2];
    const Py_ssize_t columns = uni->shape[0];
    Py_ssize_t n = size;
    if (take_index(nargs == 10 ? args[9] : Py_None, &index_array, &index, &n, size, "rows") < 0)
        goto fail;
    if (!expect(totals->shape[1] == n && out->shape[0] == shapes && out->shape[1] == n, "totals, out and the asked rows")
        || !expect(need->shape[0] == shapes && need->shape[1] == columns && ignored->shape[0] == shapes
                   && ignored->shape[1] == columns && taken->shape[0] == columns, "need, ignored, taken and union")
        || !expect(firsts->shape[0] == n && able->shape[0] == n, "firsts, able and the asked rows"))
        goto fail;
    for (Py_ssize_t u = 0; u < columns; u++) {
        int64_t c = *(const int64_t *)((const char *)uni->buf + u * uni->strides[0]);
        if (!expect(c >= 0 && c < zfree->shape[0], "a union column within zfree"))
            goto fail;
    }
#define EL1(v, i) (*(const int64_t *)((const char *)(v)->buf + (i) * (v)->strides[0]))
#define EL2(v, i, j) (*(int64_t *)((char *)(v)->buf + (i) * (v)->strides[0] + (j) * (v)->strides[1]))
#define B1(v, i) (*((const unsigned char *)(v)->buf + (i) * (v)->strides[0]))
#define B2(v, i, j) (*((const unsigned char *)(v)->buf + (i) * (v)->strides[0] + (j) * (v)->strides[1]))
    for (Py_ssize_t j = 0; j < n; j++) {
        const int64_t z = EL1(firsts, j);
        const int lowers = B1(able, j) && z >= 0 && z < zones;
        const Py_ssize_t row = index ? index[j] : j;
        for (Py_ssize_t k = 0; k < shapes; k++) {
            int64_t total = EL2(totals, k, j);
            if (lowers) {
                int64_t before = INT64_MAX, after = INT64_MAX;
                for (Py_ssize_t u = 0; u < columns; u++) {
                    if (B2(ignored, k, u))
                        continue;
                    const int64_t d = EL2(need, k, u);
                    const int64_t free_now = *(const int64_t *)((const char *)zfree->buf + EL1(uni, u) * zfree->strides[0]
                                                                + z * zfree->strides[1] + row * zfree->strides[2]);
                    const int64_t b = floor_div(free_now, d), left = floor_div(free_now - EL1(taken, u), d);
                    before = b < before ? b : before;
                    after = left < after ? left : after;
                }
                total -= before - after;
            }
            EL2(out, k, j) = total;
        }
    }
#undef EL1
#undef EL2
#undef B1
#undef B2
    release(a, 9);
    release(&index_array, 1);
    Py_RETURN_NONE;
fail:
    release(a, 9);
    release(&index_array, 1);
    return NULL;
}

/* ---- the framework: rows a filter refused ---------------------------------------------------------- */

PyDoc_STRVAR(refuse_doc,
"refuse(mask, pending, at, verdict, reason, codes, lut, kept_pending, kept_at) -> int\n\n"
"A filter's answer over the pending rows: where mask[j] is False, verdict[pending[j]] = reason (a number),\n"
"or lut[codes[j]] where codes is given; the pending positions and rows (at; None when they are the same)\n"
"of the rows it kept are written, in order, to the front of kept_pending and kept_at (None with at). Returns\n"
"how many it kept. mask: bool; pending, at, codes, lut, verdict, kept_*: int64.");

static PyObject *refuse(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "refuse takes mask, pending, at, verdict, reason, codes, lut, kept_pending, kept_at");
        return NULL;
    }
    Array mask = {{0}}, pending = {{0}}, at = {{0}}, verdict = {{0}}, codes = {{0}}, lut = {{0}}, kept_pending = {{0}},
          kept_at = {{0}};
    PyObject *result = NULL;
    int64_t reason = 0;
    const int with_at = args[2] != Py_None, with_codes = args[5] != Py_None;
    if (take_array(args[0], &mask, 1, 'b', 0, "mask") < 0 || take_array(args[1], &pending, 1, 'i', 0, "pending") < 0
        || (with_at && take_array(args[2], &at, 1, 'i', 0, "at") < 0)
        || take_array(args[3], &verdict, 1, 'i', 1, "verdict") < 0
        || (with_codes && (take_array(args[5], &codes, 1, 'i', 0, "codes") < 0 || take_array(args[6], &lut, 1, 'i', 0, "lut") < 0))
        || take_array(args[7], &kept_pending, 1, 'i', 1, "kept_pending") < 0
        || (with_at && take_array(args[8], &kept_at, 1, 'i', 1, "kept_at") < 0))
        goto done;
    if (!with_codes) {
        reason = PyLong_AsLongLong(args[4]);
        if (reason == -1 && PyErr_Occurred())
            goto done;
    }
    const Py_ssize_t n = mask.view.shape[0], size = verdict.view.shape[0];
    if (!expect(pending.view.shape[0] == n && kept_pending.view.shape[0] >= n, "mask, pending and kept_pending")
        || !expect(!with_at || (at.view.shape[0] == n && kept_at.view.shape[0] >= n), "mask, at and kept_at")
        || !expect(!with_codes || codes.view.shape[0] == n, "mask and codes"))
        goto done;
    const unsigned char *ok = (const unsigned char *)mask.view.buf;
    const int64_t *pos = (const int64_t *)pending.view.buf, *rows = with_at ? (const int64_t *)at.view.buf : NULL;
    const int64_t *code = with_codes ? (const int64_t *)codes.view.buf : NULL, *table = with_codes ? (const int64_t *)lut.view.buf : NULL;
    const Py_ssize_t texts = with_codes ? lut.view.shape[0] : 0;
    int64_t *out = (int64_t *)verdict.view.buf, *keep = (int64_t *)kept_pending.view.buf;
    int64_t *keep_at = with_at ? (int64_t *)kept_at.view.buf : NULL;
    for (Py_ssize_t j = 0; j < n; j++) { /* checked before anything is written */
        if (!expect(pos[j] >= 0 && pos[j] < size, "pending positions within verdict"))
            goto done;
        if (!ok[j] && with_codes && !expect(code[j] >= 0 && code[j] < texts, "codes within lut"))
            goto done;
    }
    Py_ssize_t kept = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (ok[j]) {
            keep[kept] = pos[j];
            if (with_at)
                keep_at[kept] = rows[j];
            kept++;
        } else {
            out[pos[j]] = with_codes ? table[code[j]] : reason;
        }
    }
    result = PyLong_FromSsize_t(kept);
done:
    release(&mask, 1);
    release(&pending, 1);
    release(&at, 1);
    release(&verdict, 1);
    release(&codes, 1);
    release(&lut, 1);
    release(&kept_pending, 1);
    release(&kept_at, 1);
    return result;
}

/* ---- module --------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"scarcity_loss", (PyCFunction)(void (*)(void))scarcity_loss, METH_FASTCALL, scarcity_loss_doc},
    {"refuse", (PyCFunction)(void (*)(void))refuse, METH_FASTCALL, refuse_doc},
    {"scarcity_zone_totals", (PyCFunction)(void (*)(void))scarcity_zone_totals, METH_FASTCALL, scarcity_zone_totals_doc},
    {"scarcity_rows", (PyCFunction)(void (*)(void))scarcity_rows, METH_FASTCALL, scarcity_rows_doc},
    {"first_zone_holding", (PyCFunction)(void (*)(void))first_zone_holding, METH_FASTCALL, first_zone_holding_doc},
    {"short_bits", (PyCFunction)(void (*)(void))short_bits, METH_FASTCALL, short_bits_doc},
    {"fit_score", (PyCFunction)(void (*)(void))fit_score, METH_FASTCALL, fit_score_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rowloops",
    "Compiled row loops of the scheduler's plugins (see toposched.scheduler.rowloops).", -1, methods,
};

PyMODINIT_FUNC PyInit__rowloops(void)
{
    return PyModule_Create(&module);
}
