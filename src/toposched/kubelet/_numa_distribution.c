/* The search of the kubelet's distribute-cpus-across-numa option, compiled: the same integer and
 * floating-point operations, in the same order, as the Python form in
 * toposched.kubelet.numa_distribution (read that first; this file follows it line for line).
 *
 * The balance of a split is a standard deviation rounded to three decimals; two forms agree only
 * if every sum is formed in the same order and no multiply-add is fused, so this file is compiled
 * with -ffp-contract=off and never with -ffast-math.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MOST_NUMAS 64
#define MOST_AMOUNT ((int64_t)1 << 40) /* CPU counts far above any machine; sums of 64 stay exact */

/* Go's math.Round: half away from zero. */
static double go_round(double x)
{
    double t = trunc(x);
    if (fabs(x - t) >= 0.5)
        t += copysign(1.0, x);
    return t;
}

static double standard_deviation(const int64_t *xs, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)xs[i];
    double mean = go_round(sum / (double)n * 1000.0) / 1000.0;
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        double d = (double)xs[i] - mean;
        total += d * d;
    }
    return go_round(sqrt(total / (double)n) * 1000.0) / 1000.0;
}

/* Hands `remainder` CPUs out over `subset` in groups, round robin; 0 if it cannot finish. */
static int spread_remainder(int64_t *avail, const int *subset, int size, int64_t remainder, int64_t group)
{
    while (remainder > 0) {
        int progressed = 0;
        for (int j = 0; j < size; j++) {
            if (remainder == 0)
                break;
            if (avail[subset[j]] < group)
                continue;
            avail[subset[j]] -= group;
            remainder -= group;
            progressed = 1;
        }
        if (!progressed)
            return 0;
    }
    return 1;
}

/* The first combination of k of n (positions ascending) into idx; then each next in lexicographic
 * order, as itertools.combinations gives them; 0 after the last. */
static void first_combination(int *idx, int k)
{
    for (int i = 0; i < k; i++)
        idx[i] = i;
}

static int next_combination(int *idx, int k, int n)
{
    int i = k - 1;
    while (i >= 0 && idx[i] == n - k + i)
        i--;
    if (i < 0)
        return 0;
    idx[i]++;
    for (int j = i + 1; j < k; j++)
        idx[j] = idx[j - 1] + 1;
    return 1;
}

static int read_amounts(PyObject *list, int64_t *out, Py_ssize_t most, Py_ssize_t *count, const char *name)
{
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of integers", name);
        return 0;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n > most) {
        PyErr_Format(PyExc_ValueError, "%s: at most %zd NUMA nodes, got %zd", name, most, n);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
        if (v == -1 && PyErr_Occurred())
            return 0;
        out[i] = (int64_t)v;
    }
    *count = n;
    return 1;
}

static PyObject *positions(const int *idx, int k)
{
    PyObject *out = PyTuple_New(k);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < k; i++) {
        PyObject *v = PyLong_FromLong(idx[i]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

PyDoc_STRVAR(best_combination_doc,
"best_combination(free, count, group, k, sockets) -> ((positions...), (positions...) | None) | None\n\n"
"toposched.kubelet.numa_distribution.best_combination, compiled: free a list of at most 64\n"
"non-negative CPU counts, sockets None or a list as long of socket bits (below 2**63).");

static PyObject *best_combination(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "best_combination(free, count, group, k, sockets) takes 5 arguments");
        return NULL;
    }
    int64_t free_[MOST_NUMAS], socket_bits[MOST_NUMAS];
    Py_ssize_t n = 0, n_sockets = 0;
    if (!read_amounts(args[0], free_, MOST_NUMAS, &n, "free"))
        return NULL;
    long long count = PyLong_AsLongLong(args[1]), group = PyLong_AsLongLong(args[2]), k_arg = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    int align = args[4] != Py_None;
    if (align) {
        if (!read_amounts(args[4], socket_bits, MOST_NUMAS, &n_sockets, "sockets"))
            return NULL;
        if (n_sockets != n) {
            PyErr_SetString(PyExc_ValueError, "sockets must be as long as free");
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (free_[i] < 0 || free_[i] >= MOST_AMOUNT || (align && socket_bits[i] < 0)) {
            PyErr_SetString(PyExc_ValueError, "free CPU counts and socket bits must be non-negative (counts below 2**40)");
            return NULL;
        }
    }
    if (count < 0 || count >= MOST_AMOUNT || group < 1 || group >= MOST_AMOUNT || k_arg < 1) {
        PyErr_SetString(PyExc_ValueError, "count must be non-negative, group and k positive");
        return NULL;
    }
    if (k_arg > n)
        Py_RETURN_NONE;
    int k = (int)k_arg;

    int combo[MOST_NUMAS], rest[MOST_NUMAS], sub[MOST_NUMAS];
    int best_combo[MOST_NUMAS], best_rest[MOST_NUMAS], local_rest[MOST_NUMAS];
    int64_t after[MOST_NUMAS], trial[MOST_NUMAS];
    int found = 0, best_rest_size = -1, best_in_one_socket = 0;
    double best_balance = INFINITY;

    first_combination(combo, k);
    do {
        if (best_balance == 0.0 && (!align || best_in_one_socket))
            break;
        int64_t sum = 0, groups = 0;
        for (int i = 0; i < k; i++) {
            sum += free_[combo[i]];
            groups += free_[combo[i]] / group;
        }
        if (sum < count || groups * group < count)
            continue;
        int64_t distribution = (count / k / group) * group;
        if (align) {
            for (int i = 0; i < k; i++) {
                int64_t whole = free_[combo[i]] / group * group;
                if (whole < distribution)
                    distribution = whole;
            }
        }
        int short_of = 0;
        for (int i = 0; i < k; i++)
            short_of |= free_[combo[i]] < distribution;
        if (short_of)
            continue;
        memcpy(after, free_, sizeof(int64_t) * (size_t)n);
        for (int i = 0; i < k; i++)
            after[combo[i]] -= distribution;
        int64_t remainder = count - distribution * k;
        int m = 0;
        for (int i = 0; i < k; i++)
            if (after[combo[i]] >= group)
                rest[m++] = combo[i];
        double local_balance = INFINITY;
        int local_size = -1; /* -1: no remainder subset */
        if (remainder == 0)
            local_balance = standard_deviation(after, (int)n);
        for (int size = m; remainder > 0 && size >= 1; size--) {
            first_combination(sub, size);
            do {
                int subset[MOST_NUMAS];
                int64_t held = 0;
                for (int j = 0; j < size; j++) {
                    subset[j] = rest[sub[j]];
                    held += after[subset[j]];
                }
                if (held < remainder)
                    continue;
                memcpy(trial, after, sizeof(int64_t) * (size_t)n);
                if (!spread_remainder(trial, subset, size, remainder, group))
                    continue;
                double balance = standard_deviation(trial, (int)n);
                if (balance < local_balance) {
                    local_balance = balance;
                    local_size = size;
                    memcpy(local_rest, subset, sizeof(int) * (size_t)size);
                }
            } while (next_combination(sub, size, m));
        }
        int in_one_socket = 0;
        if (align) {
            uint64_t bits = 0;
            for (int i = 0; i < k; i++)
                bits |= (uint64_t)socket_bits[combo[i]];
            in_one_socket = __builtin_popcountll(bits) <= 1;
        }
        int better = local_balance < best_balance;
        if (align && in_one_socket != best_in_one_socket)
            better = in_one_socket;
        if (better) {
            best_balance = local_balance;
            memcpy(best_combo, combo, sizeof(int) * (size_t)k);
            best_rest_size = local_size;
            if (local_size > 0)
                memcpy(best_rest, local_rest, sizeof(int) * (size_t)local_size);
            best_in_one_socket = in_one_socket;
            found = 1;
        }
    } while (next_combination(combo, k, (int)n));

    if (!found)
        Py_RETURN_NONE;
    PyObject *chosen = positions(best_combo, k);
    if (chosen == NULL)
        return NULL;
    PyObject *remainder_at;
    if (best_rest_size < 0) {
        remainder_at = Py_NewRef(Py_None);
    } else {
        remainder_at = positions(best_rest, best_rest_size);
        if (remainder_at == NULL) {
            Py_DECREF(chosen);
            return NULL;
        }
    }
    return Py_BuildValue("(NN)", chosen, remainder_at);
}

static PyMethodDef methods[] = {
    {"best_combination", (PyCFunction)(void (*)(void))best_combination, METH_FASTCALL, best_combination_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_numa_distribution",
    "The distribute-cpus-across-numa search, compiled (see toposched.kubelet.numa_distribution).", -1, methods,
};

PyMODINIT_FUNC PyInit__numa_distribution(void)
{
    return PyModule_Create(&module);
}
