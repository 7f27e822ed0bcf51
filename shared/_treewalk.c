/* The hot path's tree walk in C: shared/tree_eval.py lays every tree out as a complete
   binary tree of one depth; this sums, per row, the leaf each tree sends the row to.

   walk(x, features, thresholds, leaves, out, n_rows, n_cols, n_trees, depth, base)
     x           n_rows * n_cols float32, row-major (the model's feature matrix)
     features    n_trees * (2^depth - 1) int32: the column each internal node splits on
     thresholds  n_trees * (2^depth - 1) float64: a row goes right when x >= threshold
     leaves      n_trees * 2^depth float64
     out         n_rows float64, written: base + sum of the rows' leaves

   Every size and feature index is checked before the walk; a mismatch raises ValueError.
   The walk itself runs without the GIL. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Rows walk one tree together in blocks: their paths are independent, so the CPU overlaps
   them instead of waiting on one row's chain of dependent loads (1.7x on 100 rows). */
enum { BLOCK = 16, MAX_DEPTH = 16 };

static int big_enough(const Py_buffer *b, Py_ssize_t items, Py_ssize_t item_size) {
    return items >= 0 && b->len >= items * item_size;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer x, features, thresholds, leaves, out;
    Py_ssize_t n_rows, n_cols, n_trees;
    int depth;
    double base;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*nnnid", &x, &features, &thresholds, &leaves, &out,
                          &n_rows, &n_cols, &n_trees, &depth, &base))
        return NULL;
    const char *problem = NULL;
    Py_ssize_t internal = 0;
    if (depth < 1 || depth > MAX_DEPTH || n_rows < 0 || n_cols < 1 || n_trees < 0)
        problem = "walk: depth, rows, columns or trees out of range";
    else {
        internal = ((Py_ssize_t)1 << depth) - 1;
        if (!big_enough(&x, n_rows * n_cols, sizeof(float))
            || !big_enough(&features, n_trees * internal, sizeof(int32_t))
            || !big_enough(&thresholds, n_trees * internal, sizeof(double))
            || !big_enough(&leaves, n_trees * (internal + 1), sizeof(double))
            || !big_enough(&out, n_rows, sizeof(double)))
            problem = "walk: a buffer is smaller than its stated shape";
    }
    const int32_t *f = features.buf;
    for (Py_ssize_t i = 0; problem == NULL && i < n_trees * internal; i++)
        if (f[i] < 0 || f[i] >= n_cols)
            problem = "walk: a split names a column outside the matrix";
    if (problem == NULL) {
        const float *xv = x.buf;
        const double *t = thresholds.buf, *lv = leaves.buf;
        double *o = out.buf;
        const Py_ssize_t width = internal + 1;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r0 = 0; r0 < n_rows; r0 += BLOCK) {
            const Py_ssize_t m = n_rows - r0 < BLOCK ? n_rows - r0 : BLOCK;
            const float *rows = xv + r0 * n_cols;
            double sum[BLOCK] = {0};
            for (Py_ssize_t k = 0; k < n_trees; k++) {
                const int32_t *tf = f + k * internal;
                const double *tt = t + k * internal;
                Py_ssize_t at[BLOCK] = {0};
                for (int d = 0; d < depth; d++)
                    for (Py_ssize_t j = 0; j < m; j++)
                        at[j] = 2 * at[j] + 1
                                + ((double)rows[j * n_cols + tf[at[j]]] >= tt[at[j]]);
                const double *tl = lv + k * width - internal;
                for (Py_ssize_t j = 0; j < m; j++)
                    sum[j] += tl[at[j]];
            }
            for (Py_ssize_t j = 0; j < m; j++)
                o[r0 + j] = base + sum[j];
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&features);
    PyBuffer_Release(&thresholds);
    PyBuffer_Release(&leaves);
    PyBuffer_Release(&out);
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Sum, per row, of the leaves complete trees send it to."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_treewalk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__treewalk(void) { return PyModule_Create(&module); }
