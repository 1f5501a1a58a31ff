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

#define MAX_ARRAYS 64                     /* arrays in one sequence argument */
#define MAX_HELD (3 * MAX_ARRAYS + 16)    /* arrays one call holds */

/* What one call holds: the buffers it took (released together by call_end) and one scratch buffer. */
typedef struct {
    Array held[MAX_HELD];
    int count;
    void *scratch;
} Call;

/* Starts a call of `nargs` arguments; 0 with TypeError (`usage`) when they are not least to most. */
static int call_begin(Call *c, Py_ssize_t nargs, Py_ssize_t least, Py_ssize_t most, const char *usage)
{
    c->count = 0;
    c->scratch = NULL;
    if (nargs < least || nargs > most) {
        PyErr_Format(PyExc_TypeError, "%s", usage);
        return 0;
    }
    return 1;
}

/* Releases what the call holds and returns `result` (NULL: the error set stands). */
static PyObject *call_end(Call *c, PyObject *result)
{
    for (int i = 0; i < c->count; i++)
        if (c->held[i].held)
            PyBuffer_Release(&c->held[i].view);
    PyMem_Free(c->scratch);
    return result;
}

/* The call's scratch buffer of `bytes` (one per call), or NULL with MemoryError. */
static void *call_scratch(Call *c, size_t bytes)
{
    c->scratch = PyMem_Malloc(bytes > 0 ? bytes : 1);
    if (c->scratch == NULL)
        PyErr_NoMemory();
    return c->scratch;
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

/* `obj` as an array of `ndim` dimensions of `kind` (writable: an output), its last axis contiguous
 * unless any_stride; held by the call. NULL with ValueError naming `name` when it is not. */
static Py_buffer *take(Call *c, PyObject *obj, int ndim, char kind, int writable, int any_stride, const char *name)
{
    if (c->count >= MAX_HELD) {
        PyErr_Format(PyExc_ValueError, "%s: more than %d arrays in one call", name, MAX_HELD);
        return NULL;
    }
    Array *a = &c->held[c->count++];
    a->held = 0;
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return NULL;
    a->held = 1;
    Py_buffer *v = &a->view;
    if (v->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s: %d dimensions, expected %d", name, v->ndim, ndim);
        return NULL;
    }
    if (!format_matches(v, kind)) {
        PyErr_Format(PyExc_ValueError, "%s: item type %s of %zd bytes is not the expected one", name,
                     v->format ? v->format : "B", v->itemsize);
        return NULL;
    }
    if (!any_stride && ndim > 0 && v->shape[ndim - 1] > 1 && v->strides[ndim - 1] != v->itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: its last axis is not contiguous", name);
        return NULL;
    }
    return v;
}

/* Each item of the sequence `seq` as an array (see take) into views[0..*count). */
static int take_each(Call *c, PyObject *seq, Py_buffer **views, Py_ssize_t *count, int ndim, char kind, int any_stride,
                     const char *name)
{
    PyObject *fast = PySequence_Fast(seq, name);
    if (fast == NULL)
        return -1;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int status = 0;
    if (n > MAX_ARRAYS) {
        PyErr_Format(PyExc_ValueError, "%s: %zd arrays, at most %d", name, n, MAX_ARRAYS);
        status = -1;
    }
    for (Py_ssize_t i = 0; status == 0 && i < n; i++)
        if ((views[i] = take(c, PySequence_Fast_GET_ITEM(fast, i), ndim, kind, 0, any_stride, name)) == NULL)
            status = -1;
    *count = status == 0 ? n : 0;
    Py_DECREF(fast);
    return status;
}

/* An amount per row: one number for every row (scalar) or an int64 array over the rows. */
typedef struct {
    int64_t scalar;
    const int64_t *per_row;
    Py_ssize_t length;
} Amount;

static int take_amounts(Call *c, PyObject *seq, Amount *amounts, Py_ssize_t *count, const char *name)
{
    PyObject *fast = PySequence_Fast(seq, name);
    if (fast == NULL)
        return -1;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int status = 0;
    if (n > MAX_ARRAYS) {
        PyErr_Format(PyExc_ValueError, "%s: %zd amounts, at most %d", name, n, MAX_ARRAYS);
        status = -1;
    }
    for (Py_ssize_t i = 0; status == 0 && i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        amounts[i] = (Amount){0, NULL, 0};
        if (PyLong_Check(item)) {
            amounts[i].scalar = PyLong_AsLongLong(item);
            if (amounts[i].scalar == -1 && PyErr_Occurred())
                status = -1;
        } else {
            const Py_buffer *v = take(c, item, 1, 'i', 0, 0, name);
            if (v == NULL)
                status = -1;
            else
                amounts[i] = (Amount){0, (const int64_t *)v->buf, v->shape[0]};
        }
    }
    *count = status == 0 ? n : 0;
    Py_DECREF(fast);
    return status;
}

static inline int64_t amount(const Amount *a, Py_ssize_t row)
{
    return a->per_row ? a->per_row[row] : a->scalar;
}

/* The asked rows: an int64 index into `size` rows (each checked), or every row in order (None). */
static int take_rows(Call *c, PyObject *obj, const int64_t **index, Py_ssize_t *count, Py_ssize_t size, const char *name)
{
    *index = NULL;
    *count = size;
    if (obj == Py_None)
        return 0;
    const Py_buffer *v = take(c, obj, 1, 'i', 0, 0, name);
    if (v == NULL)
        return -1;
    *index = (const int64_t *)v->buf;
    *count = v->shape[0];
    for (Py_ssize_t j = 0; j < *count; j++) {
        if ((*index)[j] < 0 || (*index)[j] >= size) {
            PyErr_Format(PyExc_ValueError, "%s: row %lld is not among the %zd rows", name, (long long)(*index)[j], size);
            return -1;
        }
    }
    return 0;
}

/* Takes args[i] as specs[i] says, for a function of fixed arrays. */
typedef struct {
    const char *name;
    int ndim;
    char kind;
    int writable;
} Spec;

static int take_all(Call *c, PyObject *const *args, const Spec *specs, int count, int any_stride, Py_buffer **views)
{
    for (int i = 0; i < count; i++)
        if ((views[i] = take(c, args[i], specs[i].ndim, specs[i].kind, specs[i].writable, any_stride, specs[i].name)) == NULL)
            return -1;
    return 0;
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

#define EL1(v, i) (*(const int64_t *)((const char *)(v)->buf + (i) * (v)->strides[0]))
#define EL2(v, i, j) (*(int64_t *)((char *)(v)->buf + (i) * (v)->strides[0] + (j) * (v)->strides[1]))
#define EL3(v, i, j, k) (*(int64_t *)((char *)(v)->buf + (i) * (v)->strides[0] + (j) * (v)->strides[1] + (k) * (v)->strides[2]))
#define B1(v, i) (*((const unsigned char *)(v)->buf + (i) * (v)->strides[0]))
#define B2(v, i, j) (*((const unsigned char *)(v)->buf + (i) * (v)->strides[0] + (j) * (v)->strides[1]))

/* ---- the vectorised loops ----------------------------------------------------------------------- */

ROW_LOOP void fill_int64(int64_t *out, int64_t value, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++)
        out[j] = value;
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

#define FLOAT_EXACT ((int64_t)1 << 51)

/* The floor quotient of amount by d > 0, for amount in [0, 2**51): the truncated float product with
 * inv = 1 / d, within one of the true quotient there, corrected by its remainder (exact; see
 * pods_held); the remainder in *rem. */
static inline int64_t float_divmod(int64_t amount, int64_t d, double inv, int64_t *rem)
{
    int64_t q = (int64_t)((double)amount * inv);
    const int64_t r = amount - q * d;
    const int64_t high = r < 0, low = r >= d;
    q += low - high;
    *rem = r + (high - low) * d;
    return q;
}

/* One shape's term of ScarcityScore's loss: loss[j] (+)= (before - held after the pod) * value, where
 * held = max(min((f0 - t0) // d0, (f1 - t1) // d1, tot), 0), each quotient by float (see float_divmod:
 * every free amount f in [0, 2**51) and each take t in [0, 2**51)); a negative difference holds none. */
ROW_LOOP void scarcity_term(double *loss, int first_term, const int64_t *restrict f0, const int64_t *restrict f1,
                            const int64_t *restrict tot, const int64_t *restrict bef, int64_t t0, int64_t t1, int64_t d0,
                            double inv0, int64_t d1, double inv1, double value, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++) {
        int64_t r;
        const int64_t x0 = f0[j] - t0, x1 = f1[j] - t1;
        const int64_t q0 = float_divmod(x0 > 0 ? x0 : 0, d0, inv0, &r), q1 = float_divmod(x1 > 0 ? x1 : 0, d1, inv1, &r);
        const int64_t h0 = x0 >= 0 ? q0 : -1, h1 = x1 >= 0 ? q1 : -1;
        int64_t held = h0 < h1 ? h0 : h1;
        held = held < tot[j] ? held : tot[j];
        held = held > 0 ? held : 0;
        double lost = (double)(bef[j] - held) * value;
        loss[j] = first_term ? lost : loss[j] + lost;
    }
}

/* The fit score's term of one resource, by float division: every numerator and divisor below 2**52.
 * The quotient is at least 0, so truncating it floors it (and lets GCC vectorise the loop). */
ROW_LOOP void fit_term_float(int64_t *restrict total, int most, const int64_t *restrict v, const int64_t *restrict alloc,
                             int64_t want, int64_t weight, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++) {
        int64_t per = most ? (v[j] + want < alloc[j] ? v[j] + want : alloc[j]) : v[j] - want;
        per = per > 0 ? per * 100 : 0;
        double d = (double)(alloc[j] > 1 ? alloc[j] : 1);
        total[j] += (int64_t)((double)per / d) * weight;
    }
}

ROW_LOOP void gather_int64(int64_t *dst, const int64_t *src, const int64_t *index, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++)
        dst[j] = src[index[j]];
}

/* `a` at the asked rows: `a` itself for every row, else gathered into `buffer`. */
static const int64_t *asked(const int64_t *a, const int64_t *index, Py_ssize_t n, int64_t *buffer)
{
    if (index == NULL)
        return a;
    gather_int64(buffer, a, index, n);
    return buffer;
}

ROW_LOOP void mark_short(int64_t *pattern, const int64_t *a, int64_t least, int bit, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++)
        pattern[j] |= (int64_t)(a[j] < least) << bit;
}

/* ---- zones holding a request ------------------------------------------------------------------ */

/* The first zone slot of `row` that is valid and where every frees[r] is at least need[r * stride]
 * (`zones` where none is). Row by row, each search ending at the first zone that holds the needs:
 * rows have a few of the table's zone slots, the first usually holds them, and on a large table the
 * zone planes are out of the CPU caches when a pod arrives, so this reads a fraction of what a pass
 * per zone slot would. */
static inline Py_ssize_t first_zone(const Py_buffer *valid, Py_buffer *const *frees, Py_ssize_t names, Py_ssize_t zones,
                                    Py_ssize_t row, const int64_t *need, Py_ssize_t stride)
{
    for (Py_ssize_t z = 0; z < zones; z++) {
        if (!B2(valid, z, row))
            continue;
        Py_ssize_t r = 0;
        while (r < names && EL2(frees[r], z, row) >= need[r * stride])
            r++;
        if (r == names)
            return z;
    }
    return zones;
}

PyDoc_STRVAR(first_zone_holding_doc,
"first_zone_holding(valid, frees, needs, out, rows=None)\n\n"
"Per asked row, the first zone slot that is valid and holds every need: frees[r][zone, row] >= needs[r]\n"
"(a need is a number, or an int64 array with one value per asked row); the zone count where none does.\n"
"valid is zones x rows (bool), each of frees zones x rows (int64); rows the asked rows (int64), None for\n"
"every row in order; out one int64 per asked row.");

static PyObject *first_zone_holding(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    Call c;
    if (!call_begin(&c, nargs, 4, 5, "first_zone_holding takes valid, frees, needs, out and rows"))
        return NULL;
    Py_buffer *frees[MAX_ARRAYS];
    Amount needs[MAX_ARRAYS];
    Py_ssize_t n_frees = 0, n_needs = 0, n = 0;
    const int64_t *index = NULL;
    const Py_buffer *valid = take(&c, args[0], 2, 'b', 0, 1, "valid");
    const Py_buffer *out = valid ? take(&c, args[3], 1, 'i', 1, 0, "out") : NULL;
    if (out == NULL || take_each(&c, args[1], frees, &n_frees, 2, 'i', 1, "frees") < 0
        || take_amounts(&c, args[2], needs, &n_needs, "needs") < 0)
        return call_end(&c, NULL);
    const Py_ssize_t zones = valid->shape[0], size = valid->shape[1];
    if (take_rows(&c, nargs == 5 ? args[4] : Py_None, &index, &n, size, "rows") < 0)
        return call_end(&c, NULL);
    if (!expect(n_frees == n_needs, "as many needs as frees") || !expect(out->shape[0] == n, "out and the asked rows"))
        return call_end(&c, NULL);
    for (Py_ssize_t r = 0; r < n_frees; r++)
        if (!expect(frees[r]->shape[0] == zones && frees[r]->shape[1] == size, "frees and valid")
            || !expect(!needs[r].per_row || needs[r].length == n, "needs and the asked rows"))
            return call_end(&c, NULL);
    int64_t *first = (int64_t *)out->buf, need[MAX_ARRAYS];
    for (Py_ssize_t j = 0; j < n; j++) {
        for (Py_ssize_t r = 0; r < n_frees; r++)
            need[r] = amount(&needs[r], j);
        first[j] = first_zone(valid, frees, n_frees, zones, index ? index[j] : j, need, 1);
    }
    return call_end(&c, Py_NewRef(Py_None));
}

/* ---- NUMAAlignment: every request held whole by one zone ------------------------------------------ */

enum { BY_DEVICE = 0, BY_CPU = 1, BY_MEMORY = 2 };

/* Whether a row aligns a resource of this code: CPUs under the static CPU manager (cpu), memory under
 * the Static memory manager (mem), devices everywhere. */
static inline int aligned_on(int64_t code, int cpu, int mem)
{
    return code == BY_CPU ? cpu : code == BY_MEMORY ? mem : 1;
}

/* ok[j] stays set where some valid zone of the asked row holds every need (need: resources x n), and
 * is cleared elsewhere (first_zone). */
static void any_zone_holds(unsigned char *ok, const int64_t *need, const Py_buffer *valid, Py_buffer *const *frees,
                           Py_ssize_t names, Py_ssize_t zones, const int64_t *index, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++)
        if (ok[j])
            ok[j] = first_zone(valid, frees, names, zones, index ? index[j] : j, need + j, n) < zones;
}

PyDoc_STRVAR(zones_hold_doc,
"zones_hold(valid, frees, caps, widest, cpu_static, mem_static, by, needs, restricted, out, rows=None)\n\n"
"Per asked row: every request (a row of needs, requests x resources) is held whole by some valid zone,\n"
"frees[r][zone, row] >= needs[i, r], leaving out the resources the row does not align (by[r]: 0 a device,\n"
"aligned everywhere; 1 CPUs, aligned where cpu_static[row]; 2 memory, where mem_static[row]). With\n"
"restricted, the kubelet's restricted rule decides which resources must share the zone: a resource one\n"
"zone's capacity holds (widest[r][row] >= need; memory and hugepages together: one zone slot of caps\n"
"holding all of them) and that the row counts (widest > 0; for memory, any of them) must be in the zone,\n"
"the others not, and a request mixing both kinds is refused. valid zones x rows (bool); frees, caps\n"
"zones x rows and widest rows (int64), one per resource (caps and widest empty unless restricted);\n"
"cpu_static, mem_static one bool per row; out one bool per asked row; rows as first_zone_holding's.");

/* One request's need per resource and asked row in need (resources x n; INT64_MIN where the row spares
 * the resource), clearing ok[j] where restricted refuses the request outright. */
static void request_needs(int64_t *need, unsigned char *ok, const int64_t *want, const int64_t *by, Py_ssize_t names,
                          int restricted, Py_buffer *const *caps, Py_buffer *const *widest, const Py_buffer *cpu_static,
                          const Py_buffer *mem_static, Py_ssize_t zones, const int64_t *index, Py_ssize_t n)
{
    Py_ssize_t memory = 0;
    for (Py_ssize_t r = 0; r < names; r++)
        memory += by[r] == BY_MEMORY && want[r] != 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        const Py_ssize_t row = index ? index[j] : j;
        const int cpu = B1(cpu_static, row) != 0, mem = B1(mem_static, row) != 0;
        int together = 0, memory_counted = 0, some_single = 0, some_wide = 0;
        if (restricted && memory > 1) {
            for (Py_ssize_t z = 0; z < zones && !together; z++) {
                together = 1;
                for (Py_ssize_t r = 0; r < names && together; r++)
                    if (by[r] == BY_MEMORY && want[r] != 0)
                        together = EL2(caps[r], z, row) >= want[r];
            }
            for (Py_ssize_t r = 0; r < names; r++)
                if (by[r] == BY_MEMORY && want[r] != 0)
                    memory_counted |= EL1(widest[r], row) > 0;
        }
        for (Py_ssize_t r = 0; r < names; r++) {
            const int exempt = !aligned_on(by[r], cpu, mem);
            int spared = exempt;
            if (restricted && want[r] != 0) {
                const int grouped = by[r] == BY_MEMORY && memory > 1;
                const int64_t most = EL1(widest[r], row);
                const int single = grouped ? together : most >= want[r];
                const int counted = (grouped ? memory_counted : most > 0) && !exempt;
                some_single |= counted && single;
                some_wide |= counted && !single;
                spared = !(counted && single);
            }
            need[r * n + j] = spared ? INT64_MIN : want[r];
        }
        if (some_single && some_wide)
            ok[j] = 0;
    }
}

static PyObject *zones_hold(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    Call c;
    if (!call_begin(&c, nargs, 10, 11,
                    "zones_hold takes valid, frees, caps, widest, cpu_static, mem_static, by, needs, restricted, out and rows"))
        return NULL;
    Py_buffer *frees[MAX_ARRAYS], *caps[MAX_ARRAYS], *widest[MAX_ARRAYS];
    Py_ssize_t n_frees = 0, n_caps = 0, n_widest = 0, n = 0;
    const int64_t *index = NULL;
    const int restricted = PyObject_IsTrue(args[8]);
    if (restricted < 0)
        return call_end(&c, NULL);
    const Py_buffer *valid = take(&c, args[0], 2, 'b', 0, 0, "valid");
    const Py_buffer *cpu_static = valid ? take(&c, args[4], 1, 'b', 0, 0, "cpu_static") : NULL;
    const Py_buffer *mem_static = cpu_static ? take(&c, args[5], 1, 'b', 0, 0, "mem_static") : NULL;
    const Py_buffer *by = mem_static ? take(&c, args[6], 1, 'i', 0, 0, "by") : NULL;
    const Py_buffer *needs = by ? take(&c, args[7], 2, 'i', 0, 0, "needs") : NULL;
    const Py_buffer *out = needs ? take(&c, args[9], 1, 'b', 1, 0, "out") : NULL;
    if (out == NULL || take_each(&c, args[1], frees, &n_frees, 2, 'i', 0, "frees") < 0
        || take_each(&c, args[2], caps, &n_caps, 2, 'i', 0, "caps") < 0
        || take_each(&c, args[3], widest, &n_widest, 1, 'i', 0, "widest") < 0)
        return call_end(&c, NULL);
    const Py_ssize_t zones = valid->shape[0], size = valid->shape[1], names = by->shape[0], requests = needs->shape[0];
    if (take_rows(&c, nargs == 11 ? args[10] : Py_None, &index, &n, size, "rows") < 0)
        return call_end(&c, NULL);
    if (!expect(n_frees == names && needs->shape[1] == names, "frees, by and needs name the same resources")
        || !expect(!restricted || (n_caps == names && n_widest == names), "caps and widest, one per resource, with restricted")
        || !expect(cpu_static->shape[0] == size && mem_static->shape[0] == size, "cpu_static, mem_static and valid")
        || !expect(out->shape[0] == n, "out and the asked rows"))
        return call_end(&c, NULL);
    const int64_t *codes = (const int64_t *)by->buf;
    for (Py_ssize_t r = 0; r < names; r++)
        if (!expect(codes[r] >= BY_DEVICE && codes[r] <= BY_MEMORY, "by: 0, 1 or 2 per resource")
            || !expect(frees[r]->shape[0] == zones && frees[r]->shape[1] == size, "frees and valid")
            || !expect(!restricted || (caps[r]->shape[0] == zones && caps[r]->shape[1] == size
                                       && widest[r]->shape[0] == size), "caps, widest and valid"))
            return call_end(&c, NULL);
    int64_t *need = call_scratch(&c, (size_t)(names * n) * sizeof(int64_t)); /* resources x n */
    if (need == NULL)
        return call_end(&c, NULL);
    unsigned char *ok = (unsigned char *)out->buf;
    memset(ok, 1, (size_t)n);
    for (Py_ssize_t i = 0; i < requests; i++) {
        request_needs(need, ok, (const int64_t *)at2(needs, i), codes, names, restricted, caps, widest, cpu_static,
                      mem_static, zones, index, n);
        any_zone_holds(ok, need, valid, frees, names, zones, index, n);
    }
    return call_end(&c, Py_NewRef(Py_None));
}

/* ---- NUMAAlignment: a container-scope kubelet's containers, one after the other --------------------- */

enum { STEP_INIT = 0, STEP_LOWEST = 1, STEP_FORCED = 2, STEP_EITHER = 3 };

PyDoc_STRVAR(walk_zones_doc,
"walk_zones(valid, split, held, frees, caps, widest_cpu, cpu_static, mem_static, by, needs, steps, cpu,\n"
"           restricted, lenient, out, rows=None)\n\n"
"Per asked row, whether the containers of a walk (steps, k x 2 int64: a row of needs and its kind, 0 a\n"
"regular init container, 1 the lowest zone, 2 the init container's zone while its CPUs are reusable, 3\n"
"either) each find a zone, placed one after the other as a container-scope kubelet places them: the\n"
"NumPy form is toposched.scheduler.plugins.numa._containers_in_turn, whose notes give the rules.\n"
"valid, split, held zones x rows (bool); frees (and caps with restricted, else empty) one zones x rows\n"
"int64 array per resource; widest_cpu one int64 per row (None without restricted or CPUs); cpu_static,\n"
"mem_static one bool per asked row; by a code per resource (0 device, 1 CPU, 2 memory); needs requests x\n"
"resources; cpu the CPUs' resource (-1: none); out one bool per asked row.");

static inline int step_fits(Py_ssize_t z, Py_ssize_t row, const int64_t *want, const int64_t *taken, int with_memory,
                            const Py_buffer *valid, const Py_buffer *split, Py_buffer *const *frees, const int64_t *codes,
                            Py_ssize_t names, Py_ssize_t zones, int cs, int ms)
{
    if (!B2(valid, z, row) || (with_memory && B2(split, z, row)))
        return 0;
    for (Py_ssize_t r = 0; r < names; r++) {
        if (want[r] && aligned_on(codes[r], cs, ms) && EL2(frees[r], z, row) - taken[r * zones + z] < want[r])
            return 0;
    }
    return 1;
}

static PyObject *walk_zones(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    Call c;
    if (!call_begin(&c, nargs, 15, 16, "walk_zones takes valid, split, held, frees, caps, widest_cpu, cpu_static, "
                    "mem_static, by, needs, steps, cpu, restricted, lenient, out and rows"))
        return NULL;
    Py_buffer *frees[MAX_ARRAYS], *caps[MAX_ARRAYS];
    Py_ssize_t n_frees = 0, n_caps = 0, n = 0;
    const int64_t *index = NULL;
    const long long cpu = PyLong_AsLongLong(args[11]);
    const int restricted = PyObject_IsTrue(args[12]), lenient = PyObject_IsTrue(args[13]);
    if ((cpu == -1 && PyErr_Occurred()) || restricted < 0 || lenient < 0)
        return call_end(&c, NULL);
    const Py_buffer *valid = take(&c, args[0], 2, 'b', 0, 1, "valid");
    const Py_buffer *split = valid ? take(&c, args[1], 2, 'b', 0, 1, "split") : NULL;
    const Py_buffer *held = split ? take(&c, args[2], 2, 'b', 0, 1, "held") : NULL;
    const Py_buffer *cpu_static = held ? take(&c, args[6], 1, 'b', 0, 0, "cpu_static") : NULL;
    const Py_buffer *mem_static = cpu_static ? take(&c, args[7], 1, 'b', 0, 0, "mem_static") : NULL;
    const Py_buffer *by = mem_static ? take(&c, args[8], 1, 'i', 0, 0, "by") : NULL;
    const Py_buffer *needs = by ? take(&c, args[9], 2, 'i', 0, 0, "needs") : NULL;
    const Py_buffer *steps = needs ? take(&c, args[10], 2, 'i', 0, 0, "steps") : NULL;
    const Py_buffer *out = steps ? take(&c, args[14], 1, 'b', 1, 0, "out") : NULL;
    const Py_buffer *widest = NULL;
    if (out == NULL || take_each(&c, args[3], frees, &n_frees, 2, 'i', 1, "frees") < 0
        || take_each(&c, args[4], caps, &n_caps, 2, 'i', 1, "caps") < 0
        || (args[5] != Py_None && (widest = take(&c, args[5], 1, 'i', 0, 1, "widest_cpu")) == NULL))
        return call_end(&c, NULL);
    const Py_ssize_t zones = valid->shape[0], size = valid->shape[1], names = by->shape[0];
    if (take_rows(&c, nargs == 16 ? args[15] : Py_None, &index, &n, size, "rows") < 0)
        return call_end(&c, NULL);
    if (!expect(split->shape[0] == zones && split->shape[1] == size && held->shape[0] == zones && held->shape[1] == size,
                "valid, split and held")
        || !expect(n_frees == names && needs->shape[1] == names, "frees, by and needs name the same resources")
        || !expect(!restricted || n_caps == names, "caps, one per resource, with restricted")
        || !expect(cpu >= -1 && cpu < names, "cpu: a resource or -1")
        || !expect(!(restricted && cpu >= 0) || (widest != NULL && widest->shape[0] == size), "widest_cpu and valid")
        || !expect(steps->shape[1] == 2, "steps: k x 2")
        || !expect(cpu_static->shape[0] == n && mem_static->shape[0] == n && out->shape[0] == n,
                   "cpu_static, mem_static, out and the asked rows"))
        return call_end(&c, NULL);
    const int64_t *codes = (const int64_t *)by->buf, *walk = (const int64_t *)steps->buf;
    const Py_ssize_t count = steps->shape[0];
    for (Py_ssize_t r = 0; r < names; r++)
        if (!expect(codes[r] >= BY_DEVICE && codes[r] <= BY_MEMORY, "by: 0, 1 or 2 per resource")
            || !expect(frees[r]->shape[0] == zones && frees[r]->shape[1] == size, "frees and valid")
            || !expect(!restricted || (caps[r]->shape[0] == zones && caps[r]->shape[1] == size), "caps and valid"))
            return call_end(&c, NULL);
    for (Py_ssize_t s = 0; s < count; s++)
        if (!expect(walk[2 * s] >= 0 && walk[2 * s] < needs->shape[0], "steps: rows of needs")
            || !expect(walk[2 * s + 1] >= STEP_INIT && walk[2 * s + 1] <= STEP_EITHER, "steps: kinds 0 to 3"))
            return call_end(&c, NULL);
    /* Scratch: what the row's containers took (resources x zones) and its zones holding single-NUMA
     * memory allocations. */
    int64_t *taken = call_scratch(&c, (size_t)(names * zones) * sizeof(int64_t) + (size_t)zones);
    if (taken == NULL)
        return call_end(&c, NULL);
    unsigned char *held_here = (unsigned char *)(taken + names * zones);
    unsigned char *answer = (unsigned char *)out->buf;
    for (Py_ssize_t j = 0; j < n; j++) {
        const Py_ssize_t row = index ? index[j] : j;
        const int cs = B1(cpu_static, j) != 0, ms = B1(mem_static, j) != 0;
#define ALIGNED(r) aligned_on(codes[r], cs, ms)
        memset(taken, 0, (size_t)(names * zones) * sizeof(int64_t));
        for (Py_ssize_t z = 0; z < zones; z++)
            held_here[z] = lenient && B2(held, z, row);
        int ok = 1, alive = 1, init_memory = 0;
        Py_ssize_t forced = zones;
        for (Py_ssize_t s = 0; s < count; s++) {
            const int64_t *want = (const int64_t *)at2(needs, walk[2 * s]);
            const int64_t kind = walk[2 * s + 1];
            int counted = 0, with_memory = 0;
            for (Py_ssize_t r = 0; r < names; r++)
                if (want[r]) {
                    counted |= ALIGNED(r);
                    with_memory |= codes[r] == BY_MEMORY && ALIGNED(r);
                }
/* Zone z holds the step: valid, outside a multi-NUMA memory group when it asks for memory, and enough
 * of every resource it asks for that the row aligns, less what the containers before took. */
#define HOLDS(z) step_fits(z, row, want, taken, with_memory, valid, split, frees, codes, names, zones, cs, ms)
            Py_ssize_t lowest = 0;
            while (lowest < zones && !HOLDS(lowest))
                lowest++;
            int live = alive && counted;
            if (restricted) {
                int wide = 0;
                if (with_memory) { /* memory no one zone's capacity holds: no single-zone memory hint */
                    int fits_one = 0;
                    for (Py_ssize_t z = 0; z < zones && !fits_one; z++) {
                        fits_one = B2(valid, z, row);
                        for (Py_ssize_t r = 0; r < names && fits_one; r++)
                            if (codes[r] == BY_MEMORY && want[r] && ALIGNED(r))
                                fits_one = EL2(caps[r], z, row) >= want[r];
                    }
                    wide = !fits_one;
                }
                if (kind == STEP_FORCED && live && forced < zones && init_memory && wide)
                    ok = 0;
                if (cpu >= 0 && want[cpu] && ALIGNED(cpu) && EL1(widest, row) < want[cpu])
                    wide = 1;
                if (live && wide)
                    alive = 0;
                live = live && alive;
            }
            const int found = lowest < zones;
            if (lenient && live && !found) { /* no zone holds it: refused where no multi-NUMA set could either */
                for (Py_ssize_t r = 0; r < names; r++) {
                    if (codes[r] != BY_MEMORY || !want[r] || !ALIGNED(r))
                        continue;
                    uint64_t joinable = 0;
                    for (Py_ssize_t z = 0; z < zones; z++)
                        joinable += (B2(valid, z, row) && !held_here[z]) ? (uint64_t)EL2(frees[r], z, row) : 0;
                    if ((int64_t)joinable < want[r])
                        ok = 0;
                }
                alive = live = 0;
            }
            if (live && !found)
                ok = 0;
            if (lenient && live && found && with_memory)
                held_here[lowest] = 1;
            if (kind == STEP_INIT) {
                const int cpu_here = cpu >= 0 && want[cpu] > 0 && cs;
                forced = live && found && cpu_here ? lowest : zones;
                init_memory = live && found && with_memory;
                continue;
            }
            Py_ssize_t zone = lowest;
            if (kind == STEP_FORCED || kind == STEP_EITHER) {
                const int pinned = live && forced < zones;
                const int in_forced = pinned && HOLDS(forced);
                if (kind == STEP_FORCED) {
                    if (pinned && !in_forced)
                        ok = 0;
                    zone = pinned ? forced : lowest;
                } else {
                    if (in_forced && found && lowest != forced)
                        alive = 0;
                    live = live && alive;
                }
            }
            if (live && zone < zones)
                for (Py_ssize_t r = 0; r < names; r++)
                    if (want[r] && ALIGNED(r))
                        taken[r * zones + zone] += want[r];
        }
#undef HOLDS
#undef ALIGNED
        answer[j] = (unsigned char)ok;
    }
    return call_end(&c, Py_NewRef(Py_None));
}

/* ---- NodeResourcesFit --------------------------------------------------------------------------- */

/* Per-row arrays of one length with a number each (as many numbers as arrays), and the asked rows of
 * them: what short_bits and fit_score share. */
static int take_columns(Call *c, PyObject *seq, Py_buffer **views, Py_ssize_t *count, PyObject *rows_arg,
                        const int64_t **index, Py_ssize_t *n, const char *name)
{
    if (take_each(c, seq, views, count, 1, 'i', 0, name) < 0)
        return -1;
    if (!expect(*count > 0, "at least one array"))
        return -1;
    const Py_ssize_t size = views[0]->shape[0];
    for (Py_ssize_t r = 1; r < *count; r++)
        if (!expect(views[r]->shape[0] == size, "arrays of one length"))
            return -1;
    return take_rows(c, rows_arg, index, n, size, "rows");
}

static int numbers_only(const Amount *amounts, Py_ssize_t count, Py_ssize_t expected, const char *what)
{
    int ok = count == expected;
    for (Py_ssize_t r = 0; ok && r < count; r++)
        ok = amounts[r].per_row == NULL;
    return expect(ok, what);
}

/* ---- ScarcityScore's NormalizeScore ------------------------------------------------------------------ */

/* out[j] = top - (v[j] - low) * top // span, the differences below 2**51 / top (see float_divmod). */
ROW_LOOP void minmax_float(int64_t *restrict out, const int64_t *restrict v, int64_t low, int64_t span, int64_t top,
                           Py_ssize_t rows)
{
    const double inv = 1.0 / (double)span;
    for (Py_ssize_t j = 0; j < rows; j++) {
        int64_t r;
        out[j] = top - float_divmod((v[j] - low) * top, span, inv, &r);
    }
}

PyDoc_STRVAR(minmax_scores_doc,
"minmax_scores(raw, top, out)\n\n"
"Min-max normalisation, the smallest raw value scoring top and the largest 0: out = top - (raw - low) * top\n"
"// (high - low) with low and high raw's least and largest (int64 arithmetic, floored, as NumPy's); top\n"
"everywhere where every raw value is the same. raw and out int64, one per row; top at least 1.");

static PyObject *minmax_scores(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    Call c;
    if (!call_begin(&c, nargs, 3, 3, "minmax_scores takes raw, top and out"))
        return NULL;
    const Py_buffer *raw = take(&c, args[0], 1, 'i', 0, 0, "raw");
    const Py_buffer *out = raw ? take(&c, args[2], 1, 'i', 1, 0, "out") : NULL;
    if (out == NULL)
        return call_end(&c, NULL);
    const int64_t top = PyLong_AsLongLong(args[1]);
    if (top == -1 && PyErr_Occurred())
        return call_end(&c, NULL);
    const Py_ssize_t n = raw->shape[0];
    if (!expect(out->shape[0] == n, "raw and out") || !expect(top >= 1, "top: at least 1"))
        return call_end(&c, NULL);
    if (n == 0)
        return call_end(&c, Py_NewRef(Py_None));
    int64_t low = EL1(raw, 0), high = low;
    for (Py_ssize_t j = 1; j < n; j++) {
        const int64_t v = EL1(raw, j);
        low = v < low ? v : low;
        high = v > high ? v : high;
    }
    int64_t *dst = (int64_t *)out->buf;
    if (high == low) {
        fill_int64(dst, top, n);
        return call_end(&c, Py_NewRef(Py_None));
    }
    /* high - low and each (v - low) * top, as NumPy computes them: wrapping int64 arithmetic. */
    const int64_t span = (int64_t)((uint64_t)high - (uint64_t)low);
    if (raw->strides[0] == 8 && span > 0 && span < FLOAT_EXACT / top) {
        minmax_float(dst, (const int64_t *)raw->buf, low, span, top, n);
        return call_end(&c, Py_NewRef(Py_None));
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        const int64_t scaled = (int64_t)(((uint64_t)EL1(raw, j) - (uint64_t)low) * (uint64_t)top);
        dst[j] = (int64_t)((uint64_t)top - (uint64_t)floor_div(scaled, span));
    }
    return call_end(&c, Py_NewRef(Py_None));
}

PyDoc_STRVAR(short_bits_doc,
"short_bits(arrays, least, out, rows=None)\n\n"
"Per asked row, one bit per array, set where arrays[r][row] < least[r] (bit r; arrays int64 over the rows,\n"
"least numbers, at most 63 arrays); out int64 per asked row, 0 where the row has every least amount.\n"
"rows: the asked rows (int64), None for every row in order.");

static PyObject *short_bits(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    Call c;
    if (!call_begin(&c, nargs, 3, 4, "short_bits takes arrays, least, out and rows"))
        return NULL;
    Py_buffer *arrays[MAX_ARRAYS];
    Amount least[MAX_ARRAYS];
    Py_ssize_t n_arrays = 0, n_least = 0, n = 0;
    const int64_t *index = NULL;
    const Py_buffer *out = take(&c, args[2], 1, 'i', 1, 0, "out");
    if (out == NULL || take_columns(&c, args[0], arrays, &n_arrays, nargs == 4 ? args[3] : Py_None, &index, &n, "arrays") < 0
        || take_amounts(&c, args[1], least, &n_least, "least") < 0)
        return call_end(&c, NULL);
    if (!numbers_only(least, n_least, n_arrays, "as many least amounts (numbers) as arrays")
        || !expect(n_arrays <= 63, "at most 63 arrays") || !expect(out->shape[0] == n, "out and the asked rows"))
        return call_end(&c, NULL);
    int64_t *gathered = index ? call_scratch(&c, sizeof(int64_t) * (size_t)n) : NULL;
    if (index && gathered == NULL)
        return call_end(&c, NULL);
    int64_t *pattern = (int64_t *)out->buf;
    fill_int64(pattern, 0, n);
    for (Py_ssize_t r = 0; r < n_arrays; r++)
        mark_short(pattern, asked((const int64_t *)arrays[r]->buf, index, n, gathered), least[r].scalar, (int)r, n);
    return call_end(&c, Py_NewRef(Py_None));
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

static PyObject *fit_score(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    Call c;
    if (!call_begin(&c, nargs, 6, 7, "fit_score takes most, used_or_free, allocs, wants, weights, out and rows"))
        return NULL;
    Py_buffer *values[MAX_ARRAYS], *allocs[MAX_ARRAYS];
    Amount wants[MAX_ARRAYS], weights[MAX_ARRAYS];
    Py_ssize_t n_values = 0, n_allocs = 0, n_wants = 0, n_weights = 0, n = 0;
    const int64_t *index = NULL;
    PyObject *rows_arg = nargs == 7 ? args[6] : Py_None;
    const int most = PyObject_IsTrue(args[0]);
    const Py_buffer *out = most < 0 ? NULL : take(&c, args[5], 1, 'i', 1, 0, "out");
    if (out == NULL || take_columns(&c, args[1], values, &n_values, rows_arg, &index, &n, "used_or_free") < 0
        || take_each(&c, args[2], allocs, &n_allocs, 1, 'i', 0, "allocs") < 0
        || take_amounts(&c, args[3], wants, &n_wants, "wants") < 0 || take_amounts(&c, args[4], weights, &n_weights, "weights") < 0)
        return call_end(&c, NULL);
    int same_length = n_allocs == n_values;
    for (Py_ssize_t r = 0; same_length && r < n_allocs; r++)
        same_length = allocs[r]->shape[0] == values[0]->shape[0];
    if (!expect(same_length, "one allocatable array, of the arrays' length, per array")
        || !numbers_only(wants, n_wants, n_values, "one want (a number) per array")
        || !numbers_only(weights, n_weights, n_values, "one weight (a number) per array")
        || !expect(out->shape[0] == n, "out and the asked rows"))
        return call_end(&c, NULL);
    int64_t weight_sum = 0;
    for (Py_ssize_t r = 0; r < n_values; r++) {
        if (!expect(weights[r].scalar > 0, "weights positive"))
            return call_end(&c, NULL);
        weight_sum += weights[r].scalar;
    }
    int64_t *gathered = index ? call_scratch(&c, 2 * sizeof(int64_t) * (size_t)n) : NULL;
    if (index && gathered == NULL)
        return call_end(&c, NULL);
    int64_t *total = (int64_t *)out->buf;
    fill_int64(total, 0, n);
    for (Py_ssize_t r = 0; r < n_values; r++) {
        const int64_t *v = asked((const int64_t *)values[r]->buf, index, n, gathered);
        const int64_t *alloc = asked((const int64_t *)allocs[r]->buf, index, n, index ? gathered + n : NULL);
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
    return call_end(&c, Py_NewRef(Py_None));
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
"scarcity_loss(before, free_cm, need_cm, take, after_totals, value, able, out)\n\n"
"ScarcityScore's raw score per row, written into out (int64, rows):\n"
"held = max(min((free_cm[0] - take[0]) // need_cm[0], (free_cm[1] - take[1]) // need_cm[1], after_totals), 0)\n"
"per shape; loss = sum over shapes in order of (before - held) * value; out = round(max(loss, 0) * 1e6)\n"
"where able, else 0. Shapes: before, after_totals (shapes x rows); free_cm (2 x rows, each at least 0);\n"
"need_cm (2 x shapes, each at least 1); take (2, each at least 0); value (shapes, float64); able (rows, bool).");

/* Whether every value is in [0, 2**51) (the float quotients' domain). */
ROW_LOOP int all_small(const int64_t *restrict values, Py_ssize_t rows)
{
    int small = 1;
    for (Py_ssize_t j = 0; j < rows; j++)
        small &= values[j] >= 0 && values[j] < FLOAT_EXACT;
    return small;
}

static PyObject *scarcity_loss(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    static const Spec specs[8] = {{"before", 2, 'i', 0}, {"free_cm", 2, 'i', 0}, {"need_cm", 2, 'i', 0}, {"take", 1, 'i', 0},
                                  {"after_totals", 2, 'i', 0}, {"value", 1, 'd', 0}, {"able", 1, 'b', 0}, {"out", 1, 'i', 1}};
    Call c;
    if (!call_begin(&c, nargs, 8, 8, "scarcity_loss takes 8 arrays"))
        return NULL;
    Py_buffer *a[8];
    if (take_all(&c, args, specs, 8, 0, a) < 0)
        return call_end(&c, NULL);
    const Py_buffer *before = a[0], *free_cm = a[1], *need_cm = a[2], *take = a[3], *after_totals = a[4];
    const Py_buffer *value = a[5], *able = a[6], *out = a[7];
    const Py_ssize_t shapes = before->shape[0], rows = before->shape[1];
    if (!expect(after_totals->shape[0] == shapes && after_totals->shape[1] == rows, "after_totals and before")
        || !expect(free_cm->shape[0] == 2 && free_cm->shape[1] == rows, "free_cm and before")
        || !expect(need_cm->shape[0] == 2 && need_cm->shape[1] == shapes, "need_cm and before")
        || !expect(take->shape[0] == 2, "take: CPU and memory")
        || !expect(value->shape[0] == shapes, "value and before")
        || !expect(able->shape[0] == rows && out->shape[0] == rows, "able, out and before"))
        return call_end(&c, NULL);
    for (Py_ssize_t k = 0; k < shapes; k++)
        if (!expect(EL2(need_cm, 0, k) > 0 && EL2(need_cm, 1, k) > 0, "need_cm: each at least 1"))
            return call_end(&c, NULL);
    const int64_t t0 = EL1(take, 0), t1 = EL1(take, 1);
    /* The float quotients need every amount in their domain and the rows contiguous; else one exact
     * division per row and shape. */
    int fast = t0 >= 0 && t0 < FLOAT_EXACT && t1 >= 0 && t1 < FLOAT_EXACT && free_cm->strides[1] == 8
               && before->strides[1] == 8 && after_totals->strides[1] == 8;
    for (Py_ssize_t k = 0; k < shapes && fast; k++)
        fast = EL2(need_cm, 0, k) < FLOAT_EXACT && EL2(need_cm, 1, k) < FLOAT_EXACT;
    for (Py_ssize_t f = 0; f < 2 && fast; f++)
        fast = all_small((const int64_t *)at2(free_cm, f), rows);
    double *loss = call_scratch(&c, sizeof(double) * (size_t)rows);
    if (loss == NULL)
        return call_end(&c, NULL);
    if (shapes == 0)
        memset(loss, 0, sizeof(double) * (size_t)rows);
    for (Py_ssize_t k = 0; k < shapes; k++) {
        const int64_t d0 = EL2(need_cm, 0, k), d1 = EL2(need_cm, 1, k);
        const double v = *(const double *)((const char *)value->buf + k * value->strides[0]);
        if (fast) {
            scarcity_term(loss, k == 0, (const int64_t *)at2(free_cm, 0), (const int64_t *)at2(free_cm, 1),
                          (const int64_t *)at2(after_totals, k), (const int64_t *)at2(before, k), t0, t1, d0,
                          1.0 / (double)d0, d1, 1.0 / (double)d1, v, rows);
            continue;
        }
        for (Py_ssize_t j = 0; j < rows; j++) {
            const int64_t h0 = floor_div(EL2(free_cm, 0, j) - t0, d0), h1 = floor_div(EL2(free_cm, 1, j) - t1, d1);
            int64_t held = h0 < h1 ? h0 : h1;
            held = held < EL2(after_totals, k, j) ? held : EL2(after_totals, k, j);
            held = held > 0 ? held : 0;
            const double lost = (double)(EL2(before, k, j) - held) * v;
            loss[j] = k == 0 ? lost : loss[j] + lost;
        }
    }
    const unsigned char *ok = (const unsigned char *)able->buf;
    int64_t *dst = (int64_t *)out->buf;
    for (Py_ssize_t j = 0; j < rows; j++) {
        double x = loss[j] > 0.0 ? loss[j] * 1e6 : 0.0;
        dst[j] = ok[j] ? round_half_even(x) : 0;
    }
    return call_end(&c, Py_NewRef(Py_None));
}

/* fewest[j] = min(fewest[j], amount[j] // d) for every row: d > 0 and every amount in [0, 2**51)
 * (float_divmod). */
ROW_LOOP void fewest_quotients(int64_t *restrict fewest, const int64_t *restrict amount, int64_t d, double inv,
                               Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++) {
        int64_t r;
        const int64_t q = float_divmod(amount[j], d, inv, &r);
        fewest[j] = q < fewest[j] ? q : fewest[j];
    }
}

/* total[j] += fewest[j] where valid[j] and able[j]. */
ROW_LOOP void add_where_valid(int64_t *restrict total, const int64_t *restrict fewest, const unsigned char *restrict valid,
                              const unsigned char *restrict able, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++)
        total[j] += (valid[j] && able[j]) ? fewest[j] : 0;
}

/* Whether every value is below 2**51. */
ROW_LOOP int all_below_exact(const int64_t *restrict values, Py_ssize_t rows)
{
    int small = 1;
    for (Py_ssize_t j = 0; j < rows; j++)
        small &= values[j] < FLOAT_EXACT;
    return small;
}

/* scarcity_rows over every row at once (rows 0..n-1, each array's rows contiguous): plane by plane,
 * the divisions by float. Returns 0 where it does not apply (an amount or need outside the float
 * quotients' domain), having written nothing. */
static int scarcity_all_rows(Call *c, const Py_buffer *zfree, const Py_buffer *zvalid, const Py_buffer *able,
                             const Py_buffer *free, const Py_buffer *uni, const Py_buffer *cm, const Py_buffer *need,
                             const Py_buffer *ignored, const Py_buffer *need_cm, const Py_buffer *totals,
                             const Py_buffer *free_cm, const Py_buffer *holds, Py_ssize_t n, int *failed)
{
    const Py_ssize_t zones = zvalid->shape[0], shapes = need->shape[0], columns = need->shape[1];
    if (zfree->strides[2] != 8 || zvalid->strides[1] != 1 || able->strides[0] != 1 || free->strides[1] != 8
        || totals->strides[1] != 8 || free_cm->strides[1] != 8 || holds->strides[1] != 8)
        return 0;
    for (Py_ssize_t k = 0; k < shapes; k++) {
        for (Py_ssize_t u = 0; u < columns; u++)
            if (!B2(ignored, k, u) && (EL2(need, k, u) <= 0 || EL2(need, k, u) >= FLOAT_EXACT))
                return 0;
        for (Py_ssize_t f = 0; f < 2; f++)
            if (EL2(need_cm, f, k) <= 0 || EL2(need_cm, f, k) >= FLOAT_EXACT)
                return 0;
    }
    for (Py_ssize_t u = 0; u < columns; u++)
        for (Py_ssize_t z = 0; z < zones; z++)
            if (!all_small((const int64_t *)at3(zfree, EL1(uni, u), z), n))
                return 0;
    for (Py_ssize_t f = 0; f < 2; f++)
        if (!all_below_exact((const int64_t *)at2(free, EL1(cm, f)), n)) /* below 0 counts as 0 */
            return 0;
    int64_t *fewest = call_scratch(c, (size_t)n * sizeof(int64_t));
    if (fewest == NULL) {
        *failed = 1;
        return 0;
    }
    const unsigned char *row_able = (const unsigned char *)able->buf;
    for (Py_ssize_t f = 0; f < 2; f++) {
        const int64_t *amount = (const int64_t *)at2(free, EL1(cm, f));
        int64_t *into = (int64_t *)at2(free_cm, f);
        for (Py_ssize_t j = 0; j < n; j++)
            into[j] = amount[j] > 0 ? amount[j] : 0;
    }
    for (Py_ssize_t k = 0; k < shapes; k++) {
        int64_t *total = (int64_t *)at2(totals, k);
        fill_int64(total, 0, n);
        for (Py_ssize_t z = 0; z < zones; z++) {
            fill_int64(fewest, NO_LIMIT, n);
            for (Py_ssize_t u = 0; u < columns; u++)
                if (!B2(ignored, k, u))
                    fewest_quotients(fewest, (const int64_t *)at3(zfree, EL1(uni, u), z), EL2(need, k, u),
                                     1.0 / (double)EL2(need, k, u), n);
            add_where_valid(total, fewest, (const unsigned char *)at2(zvalid, z), row_able, n);
        }
    }
    for (Py_ssize_t k = 0; k < shapes; k++) {
        int64_t *held = (int64_t *)at2(holds, k);
        memcpy(held, at2(totals, k), (size_t)n * sizeof(int64_t));
        for (Py_ssize_t f = 0; f < 2; f++) {
            const int64_t d = EL2(need_cm, f, k);
            fewest_quotients(held, (const int64_t *)at2(free_cm, f), d, 1.0 / (double)d, n);
        }
    }
    return 1;
}

PyDoc_STRVAR(scarcity_rows_doc,
"scarcity_rows(rows, zfree, zvalid, able, free, union, cm, need, ignored, need_cm, totals, free_cm, holds)\n\n"
"ScarcityScore's kept arrays brought up to date at the given rows. Per row r (able[i] for rows[i]):\n"
"totals[k, r] = sum over valid zones z of min over columns u not ignored[k, u] of zfree[union[u], z, r] // need[k, u]\n"
"(a zone counts where zvalid[z, r] and able); free_cm[c, r] = max(free[cm[c], r], 0); holds[k, r] =\n"
"min(totals[k, r], free_cm[0, r] // need_cm[0, k], free_cm[1, r] // need_cm[1, k]).\n"
"zfree: columns x zones x rows; zvalid: zones x rows (bool); free: resources x rows; union, cm: int64 indexes.");

static PyObject *scarcity_rows(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    static const Spec specs[13] = {{"rows", 1, 'i', 0}, {"zfree", 3, 'i', 0}, {"zvalid", 2, 'b', 0}, {"able", 1, 'b', 0},
                                   {"free", 2, 'i', 0}, {"union", 1, 'i', 0}, {"cm", 1, 'i', 0}, {"need", 2, 'i', 0},
                                   {"ignored", 2, 'b', 0}, {"need_cm", 2, 'i', 0}, {"totals", 2, 'i', 1},
                                   {"free_cm", 2, 'i', 1}, {"holds", 2, 'i', 1}};
    Call c;
    if (!call_begin(&c, nargs, 13, 13, "scarcity_rows takes 13 arrays"))
        return NULL;
    Py_buffer *a[13];
    if (take_all(&c, args, specs, 13, 1, a) < 0)
        return call_end(&c, NULL);
    const Py_buffer *rows = a[0], *zfree = a[1], *zvalid = a[2], *able = a[3], *free = a[4], *uni = a[5], *cm = a[6];
    const Py_buffer *need = a[7], *ignored = a[8], *need_cm = a[9];
    const Py_buffer *totals = a[10], *free_cm = a[11], *holds = a[12];
    const Py_ssize_t n = rows->shape[0], zones = zvalid->shape[0], size = zvalid->shape[1];
    const Py_ssize_t shapes = need->shape[0], columns = need->shape[1], kept = totals->shape[1];
    if (!expect(zfree->shape[1] == zones && zfree->shape[2] == size, "zfree and zvalid")
        || !expect(able->shape[0] == n, "able and rows") || !expect(free->shape[1] == size, "free and zvalid")
        || !expect(uni->shape[0] == columns && ignored->shape[0] == shapes && ignored->shape[1] == columns,
                   "union, need and ignored")
        || !expect(cm->shape[0] == 2 && need_cm->shape[0] == 2 && need_cm->shape[1] == shapes, "cm and need_cm")
        || !expect(totals->shape[0] == shapes && holds->shape[0] == shapes && holds->shape[1] == kept
                   && free_cm->shape[0] == 2 && free_cm->shape[1] == kept, "the kept arrays"))
        return call_end(&c, NULL);
    for (Py_ssize_t u = 0; u < columns; u++)
        if (!expect(EL1(uni, u) >= 0 && EL1(uni, u) < zfree->shape[0], "a union column within zfree"))
            return call_end(&c, NULL);
    for (Py_ssize_t k = 0; k < 2; k++)
        if (!expect(EL1(cm, k) >= 0 && EL1(cm, k) < free->shape[0], "cm within free"))
            return call_end(&c, NULL);
    for (Py_ssize_t i = 0; i < n; i++) /* all checked before any is written */
        if (!expect(EL1(rows, i) >= 0 && EL1(rows, i) < size && EL1(rows, i) < kept, "rows within the table and the kept arrays"))
            return call_end(&c, NULL);
    int every = n == size && n == kept; /* every row, in order: the plane-by-plane loops */
    for (Py_ssize_t i = 0; i < n && every; i++)
        every = EL1(rows, i) == i;
    int failed = 0;
    if (every && scarcity_all_rows(&c, zfree, zvalid, able, free, uni, cm, need, ignored, need_cm, totals, free_cm, holds, n,
                                   &failed))
        return call_end(&c, Py_NewRef(Py_None));
    if (failed)
        return call_end(&c, NULL);
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t r = EL1(rows, i);
        const int row_able = B1(able, i) != 0;
        for (Py_ssize_t k = 0; k < shapes; k++) {
            int64_t total = 0;
            for (Py_ssize_t z = 0; z < zones && row_able; z++) {
                if (!B2(zvalid, z, r))
                    continue;
                int64_t fewest = NO_LIMIT;
                for (Py_ssize_t u = 0; u < columns; u++) {
                    if (B2(ignored, k, u))
                        continue;
                    int64_t pods = floor_div(EL3(zfree, EL1(uni, u), z, r), EL2(need, k, u));
                    fewest = pods < fewest ? pods : fewest;
                }
                total += fewest;
            }
            EL2(totals, k, r) = total;
        }
        for (Py_ssize_t k = 0; k < 2; k++) {
            int64_t f = EL2(free, EL1(cm, k), r);
            EL2(free_cm, k, r) = f > 0 ? f : 0;
        }
        for (Py_ssize_t k = 0; k < shapes; k++) {
            int64_t held = EL2(totals, k, r);
            for (Py_ssize_t f = 0; f < 2; f++) {
                const int64_t q = floor_div(EL2(free_cm, f, r), EL2(need_cm, f, k));
                held = q < held ? q : held;
            }
            EL2(holds, k, r) = held;
        }
    }
    return call_end(&c, Py_NewRef(Py_None));
}

/* out[j] = totals[j] less (before[j] - after[j]) where lowers[j]. */
ROW_LOOP void lowered_totals(int64_t *restrict out, const int64_t *restrict totals, const int64_t *restrict before,
                             const int64_t *restrict after, const unsigned char *restrict lowers, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++)
        out[j] = totals[j] - (lowers[j] ? before[j] - after[j] : 0);
}

/* For every row: before[j] = min(before[j], free[j] // d) and after[j] = min(after[j], (free[j] - taken) // d),
 * floor divisions by d > 0, taken = tq d + tr (0 <= tr < d), every free[j] in [0, 2**51). The quotient is
 * the truncated float product with inv = 1 / d, within one of the true one there (the relative error of
 * the product is below 2**-52 and the quotient below 2**51), corrected by its remainder: exact. (No
 * floor(): with it GCC 12 does not vectorise the loop, and for amounts of at least 0 truncation is it.) */
ROW_LOOP void pods_held(int64_t *restrict before, int64_t *restrict after, const int64_t *restrict free, int64_t d,
                        double inv, int64_t tq, int64_t tr, Py_ssize_t rows)
{
    for (Py_ssize_t j = 0; j < rows; j++) {
        int64_t r;
        const int64_t q = float_divmod(free[j], d, inv, &r);
        const int64_t left = q - tq - (r < tr);
        before[j] = q < before[j] ? q : before[j];
        after[j] = left < after[j] ? left : after[j];
    }
}

PyDoc_STRVAR(scarcity_zone_totals_doc,
"scarcity_zone_totals(totals, zfree, union, need, ignored, taken, firsts, able, out, rows=None)\n\n"
"Per target shape k and asked row j (row = rows[j], or j): where able[j] and firsts[j] is a zone slot z,\n"
"out[k, j] = totals[k, j] - (min over columns u not ignored[k, u] of zfree[union[u], z, row] // need[k, u]\n"
"- the same of (zfree[union[u], z, row] - taken[u])); elsewhere totals[k, j].\n"
"totals, out: shapes x asked rows; zfree: columns x zones x rows; need, ignored: shapes x len(union);\n"
"taken: one int64 per union column; firsts: int64 and able: bool per asked row.");

static PyObject *scarcity_zone_totals(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    static const Spec specs[9] = {{"totals", 2, 'i', 0}, {"zfree", 3, 'i', 0}, {"union", 1, 'i', 0}, {"need", 2, 'i', 0},
                                  {"ignored", 2, 'b', 0}, {"taken", 1, 'i', 0}, {"firsts", 1, 'i', 0}, {"able", 1, 'b', 0},
                                  {"out", 2, 'i', 1}};
    Call c;
    if (!call_begin(&c, nargs, 9, 10, "scarcity_zone_totals takes 9 arrays and the asked rows"))
        return NULL;
    Py_buffer *a[9];
    const int64_t *index = NULL;
    Py_ssize_t n = 0;
    if (take_all(&c, args, specs, 9, 1, a) < 0)
        return call_end(&c, NULL);
    const Py_buffer *totals = a[0], *zfree = a[1], *uni = a[2], *need = a[3], *ignored = a[4], *taken = a[5];
    const Py_buffer *firsts = a[6], *able = a[7], *out = a[8];
    const Py_ssize_t shapes = totals->shape[0], zones = zfree->shape[1], size = zfree->shape[2];
    const Py_ssize_t columns = uni->shape[0];
    if (take_rows(&c, nargs == 10 ? args[9] : Py_None, &index, &n, size, "rows") < 0)
        return call_end(&c, NULL);
    if (!expect(totals->shape[1] == n && out->shape[0] == shapes && out->shape[1] == n, "totals, out and the asked rows")
        || !expect(need->shape[0] == shapes && need->shape[1] == columns && ignored->shape[0] == shapes
                   && ignored->shape[1] == columns && taken->shape[0] == columns, "need, ignored, taken and union")
        || !expect(firsts->shape[0] == n && able->shape[0] == n, "firsts, able and the asked rows"))
        return call_end(&c, NULL);
    for (Py_ssize_t u = 0; u < columns; u++)
        if (!expect(EL1(uni, u) >= 0 && EL1(uni, u) < zfree->shape[0], "a union column within zfree"))
            return call_end(&c, NULL);
    /* Scratch: each union column's free amount in the row's first holding zone (columns x n, 0 where the
     * row is not lowered), the rows lowered, and per shape the pods held before and after. */
    int64_t *held = call_scratch(&c, (size_t)(columns + 2) * (size_t)n * sizeof(int64_t) + (size_t)n);
    if (held == NULL)
        return call_end(&c, NULL);
    int64_t *before = held + columns * n, *after = before + n;
    unsigned char *lowers = (unsigned char *)(after + n);
    int small = 1; /* every amount in [0, 2**51): the quotients by float (see pods_held) */
    for (Py_ssize_t j = 0; j < n; j++) {
        const int64_t z = EL1(firsts, j);
        lowers[j] = B1(able, j) && z >= 0 && z < zones;
    }
    for (Py_ssize_t u = 0; u < columns; u++) {
        const Py_buffer *plane = zfree;
        const char *base = (const char *)plane->buf + EL1(uni, u) * plane->strides[0];
        int64_t *into = held + u * n;
        for (Py_ssize_t j = 0; j < n; j++) {
            const Py_ssize_t row = index ? index[j] : j;
            const int64_t v = lowers[j] ? *(const int64_t *)(base + EL1(firsts, j) * plane->strides[1] + row * plane->strides[2]) : 0;
            into[j] = v;
            small &= v >= 0 && v < FLOAT_EXACT;
        }
    }
    for (Py_ssize_t k = 0; k < shapes; k++) {
        fill_int64(before, INT64_MAX, n);
        fill_int64(after, INT64_MAX, n);
        for (Py_ssize_t u = 0; u < columns; u++) {
            if (B2(ignored, k, u))
                continue;
            const int64_t d = EL2(need, k, u), t = EL1(taken, u);
            if (small && d > 0 && t > -FLOAT_EXACT && t < FLOAT_EXACT) {
                /* One division per row: with free = q d + r and taken = tq d + tr (0 <= r, tr < d),
                 * (free - taken) // d = q - tq - (r < tr). */
                pods_held(before, after, held + u * n, d, 1.0 / (double)d, floor_div(t, d), t - floor_div(t, d) * d, n);
                continue;
            }
            for (Py_ssize_t j = 0; j < n; j++) {
                const int64_t b = floor_div(held[u * n + j], d), left = floor_div(held[u * n + j] - t, d);
                before[j] = b < before[j] ? b : before[j];
                after[j] = left < after[j] ? left : after[j];
            }
        }
        if ((totals->strides[1] == 8 && out->strides[1] == 8) || n < 2) {
            lowered_totals((int64_t *)at2(out, k), (const int64_t *)at2(totals, k), before, after, lowers, n);
            continue;
        }
        for (Py_ssize_t j = 0; j < n; j++)  /* a gathered block: rows not contiguous */
            EL2(out, k, j) = EL2(totals, k, j) - (lowers[j] ? before[j] - after[j] : 0);
    }
    return call_end(&c, Py_NewRef(Py_None));
}

/* ---- the node table's derived arrays ------------------------------------------------------------- */

PyDoc_STRVAR(derive_rows_doc,
"derive_rows(alloc, used, zfree, free, zmax, zsum, rows)\n\n"
"At each of rows (int64, along the last axis): free[r, row] = alloc[r, row] - used[r, row] for every\n"
"resource r, and zmax[r, row], zsum[r, row] the largest and the sum of zfree[r, :, row] over its zone\n"
"slots (at least one). alloc, used, free resources x rows; zfree zone resources x zones x rows; zmax,\n"
"zsum zone resources x rows; all int64 (sums wrap as NumPy's do).");

static PyObject *derive_rows(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    static const Spec specs[6] = {{"alloc", 2, 'i', 0}, {"used", 2, 'i', 0}, {"zfree", 3, 'i', 0}, {"free", 2, 'i', 1},
                                  {"zmax", 2, 'i', 1}, {"zsum", 2, 'i', 1}};
    Call c;
    if (!call_begin(&c, nargs, 7, 7, "derive_rows takes alloc, used, zfree, free, zmax, zsum and rows"))
        return NULL;
    Py_buffer *a[6];
    const int64_t *index = NULL;
    Py_ssize_t n = 0;
    if (take_all(&c, args, specs, 6, 1, a) < 0)
        return call_end(&c, NULL);
    const Py_buffer *alloc = a[0], *used = a[1], *zfree = a[2], *free = a[3], *zmax = a[4], *zsum = a[5];
    const Py_ssize_t resources = alloc->shape[0], size = alloc->shape[1];
    const Py_ssize_t zoned = zfree->shape[0], zones = zfree->shape[1];
    if (!expect(used->shape[0] == resources && free->shape[0] == resources && used->shape[1] == size
                && free->shape[1] == size, "alloc, used and free")
        || !expect(zones > 0 && zfree->shape[2] == size && zmax->shape[0] == zoned && zsum->shape[0] == zoned
                   && zmax->shape[1] == size && zsum->shape[1] == size, "zfree (one zone slot or more), zmax and zsum")
        || !expect(args[6] != Py_None, "the rows to derive"))
        return call_end(&c, NULL);
    if (take_rows(&c, args[6], &index, &n, size, "rows") < 0)
        return call_end(&c, NULL);
    for (Py_ssize_t j = 0; j < n; j++) {
        const Py_ssize_t row = index[j];
        for (Py_ssize_t r = 0; r < resources; r++)
            EL2(free, r, row) = (int64_t)((uint64_t)EL2(alloc, r, row) - (uint64_t)EL2(used, r, row));
        for (Py_ssize_t r = 0; r < zoned; r++) {
            int64_t most = EL3(zfree, r, 0, row);
            uint64_t sum = 0;
            for (Py_ssize_t z = 0; z < zones; z++) {
                const int64_t v = EL3(zfree, r, z, row);
                most = v > most ? v : most;
                sum += (uint64_t)v;
            }
            EL2(zmax, r, row) = most;
            EL2(zsum, r, row) = (int64_t)sum;
        }
    }
    return call_end(&c, Py_NewRef(Py_None));
}

/* ---- the framework: rows a filter refused ---------------------------------------------------------- */

PyDoc_STRVAR(refuse_doc,
"refuse(mask, pending, at, verdict, reason, codes, lut, kept_pending, kept_at) -> int\n\n"
"A filter's answer over the pending rows: where mask[j] is False, verdict[pending[j]] = reason (a number),\n"
"or lut[codes[j]] where codes is given; the pending positions and rows (at; None when they are the same)\n"
"of the rows it kept are written, in order, to the front of kept_pending and kept_at (None with at). Returns\n"
"how many it kept. mask: bool; pending, at, codes, lut, verdict, kept_*: int64.");

static PyObject *refuse(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    Call c;
    if (!call_begin(&c, nargs, 9, 9, "refuse takes mask, pending, at, verdict, reason, codes, lut, kept_pending, kept_at"))
        return NULL;
    const int with_at = args[2] != Py_None, with_codes = args[5] != Py_None;
    const Py_buffer *mask = take(&c, args[0], 1, 'b', 0, 0, "mask");
    const Py_buffer *pending = mask ? take(&c, args[1], 1, 'i', 0, 0, "pending") : NULL;
    const Py_buffer *verdict = pending ? take(&c, args[3], 1, 'i', 1, 0, "verdict") : NULL;
    const Py_buffer *kept_pending = verdict ? take(&c, args[7], 1, 'i', 1, 0, "kept_pending") : NULL;
    if (kept_pending == NULL)
        return call_end(&c, NULL);
    const Py_buffer *at = NULL, *kept_at = NULL, *codes = NULL, *lut = NULL;
    if (with_at && ((at = take(&c, args[2], 1, 'i', 0, 0, "at")) == NULL || (kept_at = take(&c, args[8], 1, 'i', 1, 0, "kept_at")) == NULL))
        return call_end(&c, NULL);
    if (with_codes && ((codes = take(&c, args[5], 1, 'i', 0, 0, "codes")) == NULL || (lut = take(&c, args[6], 1, 'i', 0, 0, "lut")) == NULL))
        return call_end(&c, NULL);
    int64_t reason = 0;
    if (!with_codes && (reason = PyLong_AsLongLong(args[4])) == -1 && PyErr_Occurred())
        return call_end(&c, NULL);
    const Py_ssize_t n = mask->shape[0], size = verdict->shape[0];
    if (!expect(pending->shape[0] == n && kept_pending->shape[0] >= n, "mask, pending and kept_pending")
        || !expect(!with_at || (at->shape[0] == n && kept_at->shape[0] >= n), "mask, at and kept_at")
        || !expect(!with_codes || codes->shape[0] == n, "mask and codes"))
        return call_end(&c, NULL);
    const unsigned char *ok = (const unsigned char *)mask->buf;
    const int64_t *pos = (const int64_t *)pending->buf, *rows = with_at ? (const int64_t *)at->buf : NULL;
    const int64_t *code = with_codes ? (const int64_t *)codes->buf : NULL, *table = with_codes ? (const int64_t *)lut->buf : NULL;
    const Py_ssize_t texts = with_codes ? lut->shape[0] : 0;
    int64_t *out = (int64_t *)verdict->buf, *keep = (int64_t *)kept_pending->buf;
    int64_t *keep_at = with_at ? (int64_t *)kept_at->buf : NULL;
    for (Py_ssize_t j = 0; j < n; j++) { /* checked before anything is written */
        if (!expect(pos[j] >= 0 && pos[j] < size, "pending positions within verdict")
            || (!ok[j] && with_codes && !expect(code[j] >= 0 && code[j] < texts, "codes within lut")))
            return call_end(&c, NULL);
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
    return call_end(&c, PyLong_FromSsize_t(kept));
}

/* ---- module --------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"scarcity_loss", (PyCFunction)(void (*)(void))scarcity_loss, METH_FASTCALL, scarcity_loss_doc},
    {"refuse", (PyCFunction)(void (*)(void))refuse, METH_FASTCALL, refuse_doc},
    {"scarcity_zone_totals", (PyCFunction)(void (*)(void))scarcity_zone_totals, METH_FASTCALL, scarcity_zone_totals_doc},
    {"scarcity_rows", (PyCFunction)(void (*)(void))scarcity_rows, METH_FASTCALL, scarcity_rows_doc},
    {"first_zone_holding", (PyCFunction)(void (*)(void))first_zone_holding, METH_FASTCALL, first_zone_holding_doc},
    {"zones_hold", (PyCFunction)(void (*)(void))zones_hold, METH_FASTCALL, zones_hold_doc},
    {"walk_zones", (PyCFunction)(void (*)(void))walk_zones, METH_FASTCALL, walk_zones_doc},
    {"derive_rows", (PyCFunction)(void (*)(void))derive_rows, METH_FASTCALL, derive_rows_doc},
    {"short_bits", (PyCFunction)(void (*)(void))short_bits, METH_FASTCALL, short_bits_doc},
    {"minmax_scores", (PyCFunction)(void (*)(void))minmax_scores, METH_FASTCALL, minmax_scores_doc},
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
