/* The record walk of record_walk.py in one C call: see walk_py there for the contract, which this
 * follows line for line (the property test tests/property/test_record_walk.py holds them equal).
 * No allocation per record; faults (rare) are appended to a Python list. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { STATUS_OK = 0, STATUS_NEED_MORE = 1, STATUS_INVALID = 2, STATUS_UNKNOWN = 3 };
enum { MODE_BUFFER = 0, MODE_STREAM = 1, MODE_STREAM_PARTIAL = 2 };
enum { FAULT_NO_KEY = 1, FAULT_TIMESTAMP_RANGE = 2, FAULT_LOG_APPEND_TIME = 3 };
/* What reading a varint can end in. */
enum { VARINT_OK = 0, VARINT_SHORT = 1, VARINT_TOO_LONG = 2 };

/* Kafka's ByteUtils: up to max_bytes bytes, the last byte's high bits dropped at the type's width. */
static int read_varint(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, int64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (int n = 0; n < max_bytes; n++) {
        if (p >= end)
            return VARINT_SHORT;
        uint8_t b = data[p++];
        if (!(b & 0x80)) {
            result |= (uint64_t)b << shift;
            if (max_bytes == 5) {
                uint32_t r = (uint32_t)result;
                *out = (int32_t)((r >> 1) ^ (uint32_t)(-(int32_t)(r & 1)));
            } else {
                *out = (int64_t)((result >> 1) ^ (uint64_t)(-(int64_t)(result & 1)));
            }
            *pos = p;
            return VARINT_OK;
        }
        result |= (uint64_t)(b & 0x7F) << shift;
        shift += 7;
    }
    return VARINT_TOO_LONG;
}

typedef struct {
    int64_t ts_delta, offset_delta, key_size, value_size;
} record_fields;

/* Result of parsing one record: 0 ok, 1 short (need more bytes), 2 fault. */
enum { PARSE_OK = 0, PARSE_SHORT = 1, PARSE_FAULT = 2 };

#define VARINT_OR_FAULT(max, out)                                                                   \
    do {                                                                                            \
        if (read_varint(data, &p, end, (max), (out)) != VARINT_OK) {                                \
            *reason = "invalid record structure";                                                   \
            return PARSE_FAULT;                                                                     \
        }                                                                                           \
    } while (0)

/* A body that must fill [p, end) exactly. */
static int parse_body(const uint8_t *data, Py_ssize_t p, Py_ssize_t end, record_fields *f, const char **reason) {
    int64_t headers, size;
    if (p >= end) {
        *reason = "record body is empty";
        return PARSE_FAULT;
    }
    p += 1;
    VARINT_OR_FAULT(10, &f->ts_delta);
    VARINT_OR_FAULT(5, &f->offset_delta);
    VARINT_OR_FAULT(5, &f->key_size);
    if (f->key_size > 0) {
        if (f->key_size > end - p) {
            *reason = "record key runs past the record";
            return PARSE_FAULT;
        }
        p += f->key_size;
    }
    VARINT_OR_FAULT(5, &f->value_size);
    if (f->value_size > 0) {
        if (f->value_size > end - p) {
            *reason = "record value runs past the record";
            return PARSE_FAULT;
        }
        p += f->value_size;
    }
    VARINT_OR_FAULT(5, &headers);
    if (headers < 0 || headers > end - p) {
        *reason = "invalid number of record headers";
        return PARSE_FAULT;
    }
    for (int64_t i = 0; i < headers; i++) {
        VARINT_OR_FAULT(5, &size);
        if (size < 0) {
            *reason = "invalid negative header key size";
            return PARSE_FAULT;
        }
        if (size > end - p) {
            *reason = "record header key runs past the record";
            return PARSE_FAULT;
        }
        p += size;
        VARINT_OR_FAULT(5, &size);
        if (size > 0) {
            if (size > end - p) {
                *reason = "record header value runs past the record";
                return PARSE_FAULT;
            }
            p += size;
        }
    }
    if (p != end) {
        *reason = "record length does not match its fields";
        return PARSE_FAULT;
    }
    return PARSE_OK;
}

#define VARINT_PARTIAL(max, out)                                                                    \
    do {                                                                                            \
        int rc_ = read_varint(data, &p, end, (max), (out));                                         \
        if (rc_ == VARINT_SHORT)                                                                    \
            return PARSE_SHORT;                                                                     \
        if (rc_ == VARINT_TOO_LONG) {                                                               \
            *reason = "invalid record structure";                                                   \
            return PARSE_FAULT;                                                                     \
        }                                                                                           \
    } while (0)

#define SKIP(size)                                                                                  \
    do {                                                                                            \
        if ((size) > 0) {                                                                           \
            if ((size) > end - p)                                                                   \
                return PARSE_SHORT;                                                                 \
            p += (size);                                                                            \
        }                                                                                           \
    } while (0)

/* Field by field from a stream, the length read and ignored. */
static int parse_partial(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t end, record_fields *f, const char **reason) {
    Py_ssize_t p = *pos;
    int64_t ignored, headers, size;
    VARINT_PARTIAL(5, &ignored);
    if (p >= end)
        return PARSE_SHORT;
    p += 1;
    VARINT_PARTIAL(10, &f->ts_delta);
    VARINT_PARTIAL(5, &f->offset_delta);
    VARINT_PARTIAL(5, &f->key_size);
    SKIP(f->key_size);
    VARINT_PARTIAL(5, &f->value_size);
    SKIP(f->value_size);
    VARINT_PARTIAL(5, &headers);
    if (headers < 0) {
        *reason = "invalid number of record headers";
        return PARSE_FAULT;
    }
    for (int64_t i = 0; i < headers; i++) {
        VARINT_PARTIAL(5, &size);
        if (size < 0) {
            *reason = "invalid negative header key size";
            return PARSE_FAULT;
        }
        SKIP(size);
        VARINT_PARTIAL(5, &size);
        SKIP(size);
    }
    *pos = p;
    return PARSE_OK;
}

static int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t wrap_neg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }

static PyObject *result(int status, Py_ssize_t pos, Py_ssize_t done, int64_t max_ts, int consecutive, PyObject *faults,
                        const char *reason) {
    PyObject *out = Py_BuildValue("(innLOOs)", status, pos, done, (long long)max_ts,
                                  consecutive ? Py_True : Py_False, faults, reason);
    Py_DECREF(faults);
    return out;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t pos, count, index_base;
    int mode, final, compacted, create_time, batch_lat;
    long long base_ts, batch_max_ts, now_ms, before_ms, after_ms;
    if (!PyArg_ParseTuple(args, "y*nnipnpppLLLLL", &view, &pos, &count, &mode, &final, &index_base, &compacted,
                          &create_time, &batch_lat, &base_ts, &batch_max_ts, &now_ms, &before_ms, &after_ms))
        return NULL;
    const uint8_t *data = (const uint8_t *)view.buf;
    Py_ssize_t end = view.len;
    PyObject *faults = PyList_New(0);
    if (faults == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t max_ts = -1;
    int consecutive = 1;
    Py_ssize_t done = 0;
    int status = STATUS_OK;
    const char *reason = "";
    if (pos < 0 || pos > end) {
        status = STATUS_INVALID;
        reason = "position outside the data";
        goto out;
    }
    while (done < count) {
        Py_ssize_t start = pos;
        Py_ssize_t index = index_base + done;
        record_fields f = {0, 0, 0, 0};
        int rc;
        if (mode == MODE_STREAM_PARTIAL) {
            rc = parse_partial(data, &pos, end, &f, &reason);
        } else {
            int64_t size;
            Py_ssize_t p = pos;
            int vr = read_varint(data, &p, end, 5, &size);
            if (vr == VARINT_TOO_LONG) {
                if (mode == MODE_BUFFER) {
                    status = STATUS_UNKNOWN;
                    reason = "record length varint too long";
                    goto out;
                }
                reason = "invalid record length";
                rc = PARSE_FAULT;
            } else if (vr == VARINT_SHORT) {
                rc = PARSE_SHORT;
            } else if (size < 0) {
                reason = "invalid record length";
                rc = PARSE_FAULT;
            } else if (size > end - p) {
                if (mode == MODE_BUFFER) {
                    reason = "record length runs past the batch";
                    rc = PARSE_FAULT;
                } else {
                    rc = PARSE_SHORT;
                }
            } else {
                rc = parse_body(data, p, p + (Py_ssize_t)size, &f, &reason);
                if (rc == PARSE_OK)
                    pos = p + (Py_ssize_t)size;
            }
        }
        if (rc == PARSE_SHORT) {
            pos = start;
            if (mode == MODE_BUFFER) {
                status = STATUS_INVALID;
                reason = "batch ends inside a record";
            } else if (final) {
                status = STATUS_INVALID;
                reason = "stream ends inside a record";
            } else {
                status = STATUS_NEED_MORE;
                reason = "";
            }
            goto out;
        }
        if (rc == PARSE_FAULT) {
            pos = start;
            status = STATUS_INVALID;
            goto out;
        }
        int64_t ts = batch_lat ? (int64_t)batch_max_ts : wrap_add((int64_t)base_ts, f.ts_delta);
        int fault = 0;
        if (compacted && f.key_size < 0) {
            fault = FAULT_NO_KEY;
        } else if (create_time && ts != -1) {
            int64_t diff = wrap_sub((int64_t)now_ms, ts);
            if (diff > (int64_t)before_ms || wrap_neg(diff) > (int64_t)after_ms)
                fault = FAULT_TIMESTAMP_RANGE;
        } else if (batch_lat) {
            fault = FAULT_LOG_APPEND_TIME;
        }
        if (fault) {
            PyObject *entry = Py_BuildValue("(niLLLL)", index, fault, (long long)ts, (long long)f.offset_delta,
                                            (long long)f.key_size, (long long)f.value_size);
            if (entry == NULL || PyList_Append(faults, entry) < 0) {
                Py_XDECREF(entry);
                Py_DECREF(faults);
                PyBuffer_Release(&view);
                return NULL;
            }
            Py_DECREF(entry);
        }
        if (ts > max_ts)
            max_ts = ts;
        if (f.offset_delta != (int64_t)index)
            consecutive = 0;
        done++;
    }
out:
    PyBuffer_Release(&view);
    return result(status, pos, done, max_ts, consecutive, faults, reason);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Walk up to count v2 records; see kafkalike.protocol.record_walk.walk_py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_recordwalk",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__recordwalk(void) { return PyModule_Create(&module); }
