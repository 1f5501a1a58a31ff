/* Python's small-object arenas in transparent huge pages (see toposched.scheduler.heap).
 *
 * CPython's small-object allocator (pymalloc) takes its arenas (1 MiB on 64-bit builds since 3.10)
 * from the system one at a time, each its own mapping of 4 KiB pages. A scheduler's heap is a few
 * hundred MiB of small objects (nodes, replicas, pods) that every cycle reaches here and there, so
 * much of a cycle's time is TLB misses. This allocator carves the arenas out of large mappings
 * aligned on 2 MiB and advised MADV_HUGEPAGE, so the kernel backs them with 2 MiB pages where it
 * has them (transparent huge pages in "madvise" or "always" mode), and hands every other request
 * to the allocator it replaced. Freed arenas are kept for reuse; past KEEP_FREE of them, a freed
 * arena's pages are given back to the kernel (MADV_DONTNEED) and it is reused from its address.
 * The allocator is called with the GIL held, as pymalloc is.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__linux__) && defined(MADV_HUGEPAGE)
#define HUGE_PAGE ((size_t)2 << 20)
#define REGION ((size_t)64 << 20) /* one mapping: virtual until touched (MAP_NORESERVE) */
#define KEEP_FREE 32              /* freed arenas kept with their pages */

typedef struct Region {
    char *start, *end;
    struct Region *next;
} Region;

static PyObjectArenaAllocator previous;
static size_t arena_size;  /* the one size served (pymalloc's arenas); other sizes go to previous */
static Region *regions;
static char *cursor, *limit;  /* what is left of the newest region */
static void *free_arenas;     /* freed arenas, each linked through its first word */
static size_t free_count, served;
static int installed;

static int owned(const void *p)
{
    for (const Region *r = regions; r != NULL; r = r->next)
        if ((const char *)p >= r->start && (const char *)p < r->end)
            return 1;
    return 0;
}

/* A new region aligned on a huge page, advised huge; 0 if the system refused. */
static int new_region(void)
{
    Region *region = PyMem_RawMalloc(sizeof(Region));
    if (region == NULL)
        return 0;
    char *raw = mmap(NULL, REGION + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
        PyMem_RawFree(region);
        return 0;
    }
    char *start = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    char *end = start + REGION;
    if (start > raw)
        munmap(raw, (size_t)(start - raw));
    if (raw + REGION + HUGE_PAGE > end)
        munmap(end, (size_t)(raw + REGION + HUGE_PAGE - end));
    (void)madvise(start, REGION, MADV_HUGEPAGE); /* advice: without huge pages the region still serves */
    region->start = start;
    region->end = end;
    region->next = regions;
    regions = region;
    cursor = start;
    limit = end;
    return 1;
}

static void *arena_alloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size != arena_size)
        return previous.alloc(previous.ctx, size);
    if (free_arenas != NULL) {
        void *p = free_arenas;
        free_arenas = *(void **)p;
        free_count--;
        served++;
        return p;
    }
    if ((cursor == NULL || (size_t)(limit - cursor) < size) && !new_region())
        return previous.alloc(previous.ctx, size);
    void *p = cursor;
    cursor += size;
    served++;
    return p;
}

static void arena_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (ptr == NULL)
        return;
    if (size != arena_size || !owned(ptr)) {
        previous.free(previous.ctx, ptr, size);
        return;
    }
    if (free_count >= KEEP_FREE)
        (void)madvise(ptr, size, MADV_DONTNEED); /* its pages back to the kernel; the address stays ours */
    *(void **)ptr = free_arenas; /* written after DONTNEED: the link's page is faulted in again */
    free_arenas = ptr;
    free_count++;
    served--;
}

static PyObject *install(PyObject *Py_UNUSED(self), PyObject *arg)
{
    const Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size <= 0 || (size_t)size > HUGE_PAGE || HUGE_PAGE % (size_t)size != 0) {
        PyErr_SetString(PyExc_ValueError, "the arena size must divide 2 MiB");
        return NULL;
    }
    if (!installed) {
        arena_size = (size_t)size;
        PyObject_GetArenaAllocator(&previous);
        PyObjectArenaAllocator mine = {NULL, arena_alloc, arena_free};
        PyObject_SetArenaAllocator(&mine);
        installed = 1;
    }
    Py_RETURN_TRUE;
}

static PyObject *stats(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(arg))
{
    size_t mapped = 0;
    for (const Region *r = regions; r != NULL; r = r->next)
        mapped += (size_t)(r->end - r->start);
    return Py_BuildValue("{s:O,s:n,s:n,s:n,s:n}", "installed", installed ? Py_True : Py_False, "arena_bytes",
                         (Py_ssize_t)arena_size, "arenas", (Py_ssize_t)served, "free_arenas", (Py_ssize_t)free_count,
                         "reserved_bytes", (Py_ssize_t)mapped);
}
#else
static PyObject *install(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(arg))
{
    Py_RETURN_FALSE; /* no madvise(MADV_HUGEPAGE) here: Python's own arenas stay */
}

static PyObject *stats(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(arg))
{
    return Py_BuildValue("{s:O,s:n,s:n,s:n,s:n}", "installed", Py_False, "arena_bytes", (Py_ssize_t)0, "arenas",
                         (Py_ssize_t)0, "free_arenas", (Py_ssize_t)0, "reserved_bytes", (Py_ssize_t)0);
}
#endif

PyDoc_STRVAR(install_doc, "install(arena_bytes)\n\n"
"From now on, take Python's small-object arenas (of arena_bytes, which must divide 2 MiB) from regions\n"
"advised MADV_HUGEPAGE; True where this platform can (Linux), False elsewhere. Installing twice\n"
"changes nothing.");
PyDoc_STRVAR(stats_doc, "stats()\n\n"
"{'installed', 'arena_bytes' (the size served), 'arenas' (in use), 'free_arenas' (kept for reuse),\n"
"'reserved_bytes' (address space reserved)}.");

static PyMethodDef methods[] = {
    {"install", install, METH_O, install_doc},
    {"stats", stats, METH_NOARGS, stats_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hugearenas",
    "Python's small-object arenas in transparent huge pages (see toposched.scheduler.heap).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__hugearenas(void)
{
    return PyModule_Create(&module);
}
