/* The store's hot byte work, compiled: the twin of hot_py.py (which is the reference and fallback).
 *
 * Why C: per 1 KiB message the pure-Python store spends most of its time in CPython call and object
 * overhead around a few hundred bytes of work (record encoding, a consume queue unit, two index
 * entries). Each function here does exactly what the same-named function of hot_py.py does, with
 * the same results, bytes and exceptions; the test suite runs the codec, store and golden tests on
 * both. Anything unusual (non-str properties, odd host values, lone surrogates) is handed to the
 * Python functions registered with init(), so rare paths cannot drift from the reference.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#define MAGIC_V1 ((int32_t)-626843481)
#define MAGIC_V2 ((int32_t)-626843477)
#define BORNHOST_V6_FLAG 0x10
#define STOREHOST_V6_FLAG 0x20
#define HOST_FLAGS (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
#define SYS_FLAG_POS 36
#define CRC32_RESERVED_LEN 20
#define INDEX_HEADER_SIZE 40
#define INT32_MAX_V 0x7FFFFFFF

/* Registered by init(): RecordError, the CRC function (isal or zlib crc32), and Python fallbacks. */
static PyObject *RecordError = NULL;
static PyObject *crc32_func = NULL;
static PyObject *encode_properties_func = NULL;
static PyObject *encode_host_func = NULL;
static PyObject *known_properties_func = NULL;
static PyObject *java_hash_func = NULL;
static PyObject *py_index_put_keys = NULL;
static PyObject *py_check_message = NULL;  /* validate.check_message: the reference verdict and message */
static PyObject *py_check_host = NULL;     /* validate.check_host */
/* Hosts (exact (str, int) tuples) the reference accepted: a store sees few distinct ones. */
static PyObject *valid_hosts = NULL;
#define VALID_HOSTS_MAX 4096

static PyObject *s_topic, *s_body, *s_properties, *s_queue_id, *s_flag, *s_sys_flag, *s_born_timestamp,
    *s_born_host, *s_store_host, *s_reconsume_times, *s_prepared_transaction_offset, *s_TAGS, *s_KEYS,
    *s_UNIQ_KEY, *s_INNER_NUM, *s_INNER_BASE, *s_schedule_topic, *s_keep_store_timestamp, *s_store_timestamp;

static int not_initialised(void) {
    if (RecordError != NULL) return 0;
    PyErr_SetString(PyExc_RuntimeError, "_hotpath.init() has not been called (import hotpath instead)");
    return 1;
}

/* ------------------------------------------------------------------ big-endian helpers */

static inline void put_i16(unsigned char *p, int32_t v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }
static inline void put_i32(unsigned char *p, int64_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24); p[1] = (unsigned char)(u >> 16); p[2] = (unsigned char)(u >> 8); p[3] = (unsigned char)u;
}
static inline void put_i64(unsigned char *p, int64_t v) {
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) { p[i] = (unsigned char)u; u >>= 8; }
}
static inline int32_t get_i32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}
static inline int16_t get_i16(const unsigned char *p) { return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]); }
static inline int64_t get_i64(const unsigned char *p) {
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = (u << 8) | p[i];
    return (int64_t)u;
}

/* Range-checked integer conversions, matching struct's 'h', 'i' and 'q' codes (struct.error otherwise). */
static PyObject *struct_error = NULL;

static int as_i64(PyObject *o, int64_t *out) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(struct_error, "required argument is not an integer");
        }
        return -1;
    }
    if (overflow) {
        PyErr_SetString(struct_error, "argument out of range");
        return -1;
    }
    *out = v;
    return 0;
}

static int as_i32(PyObject *o, int64_t *out) {
    if (as_i64(o, out) < 0) return -1;
    if (*out < INT32_MIN || *out > INT32_MAX) {
        PyErr_SetString(struct_error, "argument out of range");
        return -1;
    }
    return 0;
}

static int as_i16(PyObject *o, int64_t *out) {
    if (as_i64(o, out) < 0) return -1;
    if (*out < -32768 || *out > 32767) {
        PyErr_SetString(struct_error, "argument out of range");
        return -1;
    }
    return 0;
}

/* The message fields put_fast reads, in this order. */
enum { F_TOPIC, F_BODY, F_PROPERTIES, F_QUEUE_ID, F_FLAG, F_SYS_FLAG, F_BORN_TS, F_BORN_HOST, F_STORE_HOST,
       F_RECONSUME, F_PREPARED, F_KEEP, N_FIELDS };

/* Where a slots class (MessageInner is a slots dataclass) keeps those fields, so they are read from the
 * instance directly instead of through ~12 generic attribute lookups (half of put_fast's time). Valid
 * while the type's version tag is unchanged: assigning a class attribute changes it. */
static struct {
    PyTypeObject *type;
    unsigned int version;
    Py_ssize_t offset[N_FIELDS];
} layout = {NULL, 0, {0}};

static PyObject **field_names[N_FIELDS] = {&s_topic, &s_body, &s_properties, &s_queue_id, &s_flag, &s_sys_flag,
                                           &s_born_timestamp, &s_born_host, &s_store_host, &s_reconsume_times,
                                           &s_prepared_transaction_offset, &s_keep_store_timestamp};

static int layout_current(PyTypeObject *tp) {
    return layout.type == tp && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) && tp->tp_version_tag == layout.version;
}

/* Learn tp's layout if every field is a plain object slot (a member descriptor of type
 * Py_T_OBJECT_EX) and instances have no __dict__ to shadow them; otherwise forget any layout. */
static void learn_layout(PyTypeObject *tp) {
    layout.type = NULL;
    if (tp->tp_dictoffset != 0 || tp->tp_getattro != PyObject_GenericGetAttr) return;
    Py_ssize_t offsets[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) {
        PyObject *d = PyObject_GetAttr((PyObject *)tp, *field_names[i]);
        if (d == NULL) { PyErr_Clear(); return; }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX &&
                 !(((PyMemberDescrObject *)d)->d_member->flags & READONLY);
        if (ok) offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) return;
    }
    if (!(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) return;  /* no tag to watch: no caching */
    memcpy(layout.offset, offsets, sizeof offsets);
    layout.version = tp->tp_version_tag;
    layout.type = tp;
}

/* PyObject_GetAttr(obj, name) for a message: a field of the learned slots layout is read from the instance
 * directly (what the generic lookup finds there: the type's member descriptor, no __dict__, no
 * __getattribute__, version tag unchanged), anything else (another type, another name, an unset slot,
 * whose AttributeError the generic lookup raises) through PyObject_GetAttr. Why: check_message,
 * prepare_record and record_parts read ~30 fields a record, ~1 us of generic lookups (issue 17). */
static PyObject *msg_attr(PyObject *obj, PyObject *name) {
    PyTypeObject *tp = Py_TYPE(obj);
    if (!layout_current(tp) && (layout.type == NULL || layout.type == tp)) learn_layout(tp);
    if (layout.type == tp) {
        for (int i = 0; i < N_FIELDS; i++) {
            if (*field_names[i] == name) {
                PyObject *v = *(PyObject **)((char *)obj + layout.offset[i]);
                if (v != NULL) return Py_NewRef(v);
                break;
            }
        }
    }
    return PyObject_GetAttr(obj, name);
}

static int attr_i(PyObject *obj, PyObject *name, int64_t *out, int bits) {
    PyObject *v = msg_attr(obj, name);
    if (v == NULL) return -1;
    int rc = bits == 64 ? as_i64(v, out) : as_i32(v, out);
    Py_DECREF(v);
    return rc;
}

/* ------------------------------------------------------------------ Java String.hashCode */

/* h = 31*h + c over UTF-16 code units of s, continuing from h. Returns -1 with no error set when s
 * holds a lone surrogate (the caller defers to the Python reference, which raises on it). */
static int java_hash_range(PyObject *s, Py_ssize_t from, Py_ssize_t n, uint32_t *h) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    uint32_t x = *h;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = (const Py_UCS1 *)data;
        for (Py_ssize_t i = from; i < n; i++) x = 31u * x + d[i];
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *d = (const Py_UCS2 *)data;
        for (Py_ssize_t i = from; i < n; i++) {
            if (d[i] >= 0xD800 && d[i] <= 0xDFFF) return -1;
            x = 31u * x + d[i];
        }
    } else {
        const Py_UCS4 *d = (const Py_UCS4 *)data;
        for (Py_ssize_t i = from; i < n; i++) {
            Py_UCS4 c = d[i];
            if (c >= 0xD800 && c <= 0xDFFF) return -1;
            if (c >= 0x10000) {
                c -= 0x10000;
                x = 31u * x + (0xD800 + (c >> 10));
                x = 31u * x + (0xDC00 + (c & 0x3FF));
            } else {
                x = 31u * x + c;
            }
        }
    }
    *h = x;
    return 0;
}

static int java_hash_continue(PyObject *s, uint32_t *h) { return java_hash_range(s, 0, PyUnicode_GET_LENGTH(s), h); }

static int32_t key_hash_of(uint32_t h) {
    int32_t v = (int32_t)h;
    if (v == INT32_MIN) return 0;  /* abs(MIN_INT) overflows to MIN_INT in Java; the store maps it to 0 */
    return v < 0 ? -v : v;
}

static PyObject *hp_java_string_hash(PyObject *self, PyObject *s) {
    if (not_initialised()) return NULL;
    if (!PyUnicode_Check(s)) return PyObject_CallOneArg(java_hash_func, s);
    uint32_t h = 0;
    if (java_hash_continue(s, &h) < 0) return PyObject_CallOneArg(java_hash_func, s);
    return PyLong_FromLong((long)(int32_t)h);
}

/* tags_code of hashing.py: 0 for None or "", else the Java hash of the TAGS string. */
static PyObject *hp_tags_code(PyObject *self, PyObject *s) {
    if (s == Py_None || (PyUnicode_Check(s) && PyUnicode_GET_LENGTH(s) == 0)) return PyLong_FromLong(0);
    return hp_java_string_hash(self, s);
}

static PyObject *hp_index_key_hash(PyObject *self, PyObject *s) {
    if (not_initialised()) return NULL;
    uint32_t h = 0;
    if (!PyUnicode_Check(s) || java_hash_continue(s, &h) < 0) {
        PyObject *r = PyObject_CallOneArg(java_hash_func, s);
        if (r == NULL) return NULL;
        long v = PyLong_AsLong(r);
        Py_DECREF(r);
        if (v == -1 && PyErr_Occurred()) return NULL;
        h = (uint32_t)v;
    }
    return PyLong_FromLong((long)key_hash_of(h));
}

/* ------------------------------------------------------------------ hosts */

/* Raw host bytes (4/16-byte address + big-endian port) into out; returns the length or -1. Anything
 * but a (str, int) tuple with a parseable address goes through the Python encode_host, which gives
 * the reference's result or exception. */
#define HOST_CACHE 8
static PyObject *host_cache_key[HOST_CACHE];
static PyObject *host_cache_raw[HOST_CACHE];
static int host_cache_next = 0;

static Py_ssize_t encode_host_uncached(PyObject *host, unsigned char out[20]);

/* encode_host with a small cache keyed by the tuple's identity: a store sees few distinct host
 * tuples (the Python twin's encode_host is lru_cached for the same reason). */
static PyObject *host_bytes(PyObject *host) {
    for (int i = 0; i < HOST_CACHE; i++) {
        if (host_cache_key[i] == host) { Py_INCREF(host_cache_raw[i]); return host_cache_raw[i]; }
    }
    unsigned char raw[20];
    Py_ssize_t n = encode_host_uncached(host, raw);
    if (n < 0) return NULL;
    PyObject *b = PyBytes_FromStringAndSize((const char *)raw, n);
    if (b == NULL) return NULL;
    if (PyTuple_CheckExact(host)) {
        int i = host_cache_next;
        host_cache_next = (i + 1) % HOST_CACHE;
        Py_XSETREF(host_cache_key[i], Py_NewRef(host));
        Py_XSETREF(host_cache_raw[i], Py_NewRef(b));
    }
    return b;
}

static Py_ssize_t encode_host_uncached(PyObject *host, unsigned char out[20]) {
    if (PyTuple_CheckExact(host) && PyTuple_GET_SIZE(host) == 2) {
        PyObject *ip = PyTuple_GET_ITEM(host, 0), *port = PyTuple_GET_ITEM(host, 1);
        if (PyUnicode_Check(ip) && PyLong_CheckExact(port) && PyUnicode_IS_ASCII(ip)) {
            Py_ssize_t iplen;
            const char *text = PyUnicode_AsUTF8AndSize(ip, &iplen);
            int overflow = 0;
            long long p = PyLong_AsLongLongAndOverflow(port, &overflow);
            if (text != NULL && !overflow && p >= INT32_MIN && p <= INT32_MAX && (size_t)iplen == strlen(text)) {
                if (memchr(text, ':', (size_t)iplen) != NULL) {
                    if (inet_pton(AF_INET6, text, out) == 1) {
                        put_i32(out + 16, p);
                        return 20;
                    }
                } else {
                    struct in_addr a;
                    if (inet_aton(text, &a) != 0) {
                        memcpy(out, &a, 4);
                        put_i32(out + 4, p);
                        return 8;
                    }
                }
            }
            if (PyErr_Occurred()) PyErr_Clear();
        }
    }
    PyObject *raw = PyObject_CallOneArg(encode_host_func, host);
    if (raw == NULL) return -1;
    Py_ssize_t n = PyBytes_Check(raw) ? PyBytes_GET_SIZE(raw) : -1;
    if (n != 8 && n != 20) {
        Py_DECREF(raw);
        PyErr_SetString(PyExc_ValueError, "encode_host returned an unexpected value");
        return -1;
    }
    memcpy(out, PyBytes_AS_STRING(raw), (size_t)n);
    Py_DECREF(raw);
    return n;
}

/* ------------------------------------------------------------------ properties */

/* The PROPERTIES string of a dict: name 0x01 value 0x02 per entry whose value is not None, or the
 * Python encode_properties when a key or value is not a str. New reference. */
static PyObject *encode_properties(PyObject *props) {
    if (props == Py_None || (PyDict_Check(props) && PyDict_GET_SIZE(props) == 0)) {
        return PyUnicode_New(0, 0);
    }
    if (!PyDict_CheckExact(props)) return PyObject_CallOneArg(encode_properties_func, props);
    Py_ssize_t i = 0, len = 0;
    PyObject *k, *v;
    Py_UCS4 maxchar = 0x7F;
    while (PyDict_Next(props, &i, &k, &v)) {
        if (v == Py_None) continue;
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v)) {
            return PyObject_CallOneArg(encode_properties_func, props);
        }
        len += PyUnicode_GET_LENGTH(k) + PyUnicode_GET_LENGTH(v) + 2;
        Py_UCS4 mk = PyUnicode_MAX_CHAR_VALUE(k), mv = PyUnicode_MAX_CHAR_VALUE(v);
        if (mk > maxchar) maxchar = mk;
        if (mv > maxchar) maxchar = mv;
    }
    PyObject *out = PyUnicode_New(len, maxchar);
    if (out == NULL) return NULL;
    Py_ssize_t pos = 0;
    i = 0;
    while (PyDict_Next(props, &i, &k, &v)) {
        if (v == Py_None) continue;
        Py_ssize_t kl = PyUnicode_GET_LENGTH(k), vl = PyUnicode_GET_LENGTH(v);
        if (maxchar <= 0x7F) {
            char *d = (char *)PyUnicode_DATA(out);
            memcpy(d + pos, PyUnicode_DATA(k), (size_t)kl);
            d[pos + kl] = 0x01;
            memcpy(d + pos + kl + 1, PyUnicode_DATA(v), (size_t)vl);
            d[pos + kl + 1 + vl] = 0x02;
        } else {
            if (PyUnicode_CopyCharacters(out, pos, k, 0, kl) < 0) { Py_DECREF(out); return NULL; }
            PyUnicode_WriteChar(out, pos + kl, 0x01);
            if (PyUnicode_CopyCharacters(out, pos + kl + 1, v, 0, vl) < 0) { Py_DECREF(out); return NULL; }
            PyUnicode_WriteChar(out, pos + kl + 1 + vl, 0x02);
        }
        pos += kl + vl + 2;
    }
    return out;
}

/* The shared part of known_properties and inner_batch_known: (TAGS, KEYS or None, UNIQ_KEY or None) from
 * an exact dict when it says what the properties string (utf8) says and the topic has no delay-level
 * tagsCode, else None. New reference. */
static PyObject *known_from_dict(PyObject *topic, PyObject *props, const char *utf8, Py_ssize_t utf8_len) {
    int eq = PyUnicode_Compare(topic, s_schedule_topic);
    if (eq == -1 && PyErr_Occurred()) return NULL;
    if (eq == 0) Py_RETURN_NONE;
    Py_ssize_t n = PyDict_GET_SIZE(props), c1 = 0, c2 = 0;
    for (Py_ssize_t i = 0; i < utf8_len; i++) {  /* 0x01/0x02 never occur inside multi-byte UTF-8 sequences */
        c1 += utf8[i] == 0x01;
        c2 += utf8[i] == 0x02;
    }
    if (c1 != n || c2 != n) Py_RETURN_NONE;
    PyObject *tags = PyDict_GetItemWithError(props, s_TAGS);
    if (tags == NULL && PyErr_Occurred()) return NULL;
    PyObject *keys = PyDict_GetItemWithError(props, s_KEYS);
    if (keys == NULL && PyErr_Occurred()) return NULL;
    PyObject *uniq = PyDict_GetItemWithError(props, s_UNIQ_KEY);
    if (uniq == NULL && PyErr_Occurred()) return NULL;
    int kt = keys == NULL ? 0 : PyObject_IsTrue(keys);
    int ut = uniq == NULL ? 0 : PyObject_IsTrue(uniq);
    if (kt < 0 || ut < 0) return NULL;
    return PyTuple_Pack(3, tags ? tags : Py_None, kt ? keys : Py_None, ut ? uniq : Py_None);
}

/* known_properties of hot_py.py: (TAGS, KEYS or None, UNIQ_KEY or None) when the dict says what the
 * string says, else None. New reference. */
static PyObject *known_properties(PyObject *topic, PyObject *props, const char *utf8, Py_ssize_t utf8_len) {
    if (!PyDict_CheckExact(props) || !PyUnicode_CheckExact(topic)) {
        PyObject *text = PyUnicode_FromStringAndSize(utf8, utf8_len);
        if (text == NULL) return NULL;
        PyObject *r = PyObject_CallFunctionObjArgs(known_properties_func, topic, props, text, NULL);
        Py_DECREF(text);
        return r;
    }
    if (PyDict_Contains(props, s_INNER_NUM)) Py_RETURN_NONE;
    return known_from_dict(topic, props, utf8, utf8_len);
}

/* ------------------------------------------------------------------ CRC */

/* Bodies of at least this many bytes get the folding CRC below when the CPU has VPCLMULQDQ. */
#define FOLD_CRC_MIN 256

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_FOLD_CRC 1

/* CRC-32 (gzip polynomial, bit-reflected) by folding: Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ", four 256-bit VPCLMULQDQ accumulators (128 bytes a round).
 *
 * Why: BODYCRC of a 64 KiB BatchCQ batch took 7.6 us through isal (8.5 GB/s: its 512-bit kernel
 * needs AVX-512, so on AVX2 machines it runs 128-bit PCLMUL); this runs ~2.2x faster on the same
 * CPU. Same value as zlib/isal (tests compare them over lengths and alignments).
 *
 * Works on the inverted CRC state; len >= 128 and a multiple of 16. Fold constants are
 * reflect32(x^e mod P) << 1 for e = 1056/992 (128-byte stride), 160/96 (16 bytes), 64; the last
 * pair is P' and mu of the Barrett reduction. */
__attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1")))
static uint32_t crc32_fold(const unsigned char *buf, size_t len, uint32_t state) {
    const __m256i k1k2 = _mm256_set_epi64x(0x14a7fe880, 0x1e88ef372, 0x14a7fe880, 0x1e88ef372);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x163cd6124);
    const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);
    __m256i y0 = _mm256_loadu_si256((const __m256i *)(buf + 0));
    __m256i y1 = _mm256_loadu_si256((const __m256i *)(buf + 32));
    __m256i y2 = _mm256_loadu_si256((const __m256i *)(buf + 64));
    __m256i y3 = _mm256_loadu_si256((const __m256i *)(buf + 96));
    y0 = _mm256_xor_si256(y0, _mm256_inserti128_si256(_mm256_setzero_si256(), _mm_cvtsi32_si128((int)state), 0));
    buf += 128;
    len -= 128;
    while (len >= 128) {
        __m256i l0 = _mm256_clmulepi64_epi128(y0, k1k2, 0x00), h0 = _mm256_clmulepi64_epi128(y0, k1k2, 0x11);
        __m256i l1 = _mm256_clmulepi64_epi128(y1, k1k2, 0x00), h1 = _mm256_clmulepi64_epi128(y1, k1k2, 0x11);
        __m256i l2 = _mm256_clmulepi64_epi128(y2, k1k2, 0x00), h2 = _mm256_clmulepi64_epi128(y2, k1k2, 0x11);
        __m256i l3 = _mm256_clmulepi64_epi128(y3, k1k2, 0x00), h3 = _mm256_clmulepi64_epi128(y3, k1k2, 0x11);
        y0 = _mm256_xor_si256(_mm256_xor_si256(l0, h0), _mm256_loadu_si256((const __m256i *)(buf + 0)));
        y1 = _mm256_xor_si256(_mm256_xor_si256(l1, h1), _mm256_loadu_si256((const __m256i *)(buf + 32)));
        y2 = _mm256_xor_si256(_mm256_xor_si256(l2, h2), _mm256_loadu_si256((const __m256i *)(buf + 64)));
        y3 = _mm256_xor_si256(_mm256_xor_si256(l3, h3), _mm256_loadu_si256((const __m256i *)(buf + 96)));
        buf += 128;
        len -= 128;
    }
    /* The eight 16-byte lanes, in stream order, folded into one 16 bytes at a time. */
    __m128i lanes[8] = {_mm256_castsi256_si128(y0), _mm256_extracti128_si256(y0, 1),
                        _mm256_castsi256_si128(y1), _mm256_extracti128_si256(y1, 1),
                        _mm256_castsi256_si128(y2), _mm256_extracti128_si256(y2, 1),
                        _mm256_castsi256_si128(y3), _mm256_extracti128_si256(y3, 1)};
    __m128i x1 = lanes[0], x2, x5;
    for (int i = 1; i < 8; i++) {
        x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), lanes[i]);
    }
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), x2);
        buf += 16;
        len -= 16;
    }
    /* 128 -> 64 bits, 64 -> 32 bits, then Barrett reduction. */
    const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
    x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, mask32);
    x1 = _mm_clmulepi64_si128(x1, k5k0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    x2 = _mm_and_si128(x1, mask32);
    x2 = _mm_clmulepi64_si128(x2, poly, 0x10);
    x2 = _mm_and_si128(x2, mask32);
    x2 = _mm_clmulepi64_si128(x2, poly, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

static int have_fold_crc = 0;  /* set at import from the CPU's features */
static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
#ifdef HAVE_FOLD_CRC
    __builtin_cpu_init();
    have_fold_crc = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq")
                    && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

static int body_crc(const char *data, Py_ssize_t len, int64_t *out) {
#ifdef HAVE_FOLD_CRC
    if (have_fold_crc && len >= FOLD_CRC_MIN) {
        const unsigned char *p = (const unsigned char *)data;
        size_t whole = (size_t)len & ~(size_t)15, rest = (size_t)len - whole;
        uint32_t state = crc32_fold(p, whole, 0xFFFFFFFFu);
        for (p += whole; rest--; p++) state = crc_table[(state ^ *p) & 0xff] ^ (state >> 8);
        *out = (int64_t)(~state & 0x7FFFFFFFu);
        return 0;
    }
#endif
    PyObject *mv = PyMemoryView_FromMemory((char *)data, len, PyBUF_READ);
    if (mv == NULL) return -1;
    PyObject *r = PyObject_CallOneArg(crc32_func, mv);
    Py_DECREF(mv);
    if (r == NULL) return -1;
    unsigned long v = PyLong_AsUnsignedLongMask(r);
    Py_DECREF(r);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    *out = (int64_t)(v & 0x7FFFFFFFUL);
    return 0;
}

/* ------------------------------------------------------------------ prepare_record */

static PyObject *record_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg != NULL) {
        PyErr_SetObject(RecordError, msg);
        Py_DECREF(msg);
    }
    return NULL;
}

static PyObject *hp_prepare_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (not_initialised()) return NULL;
    static const char *names[] = {"msg", "properties_string", "max_message_size", "append_prop_crc"};
    PyObject *a[4] = {NULL, Py_None, NULL, Py_False};
    if (nargs > 4) { PyErr_SetString(PyExc_TypeError, "prepare_record takes at most 4 arguments"); return NULL; }
    for (Py_ssize_t i = 0; i < nargs; i++) a[i] = args[i];
    if (kwnames != NULL) {
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(kwnames); j++) {
            const char *kn = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, j));
            int found = 0;
            for (int i = 0; i < 4 && kn != NULL; i++) {
                if (strcmp(kn, names[i]) == 0) { a[i] = args[nargs + j]; found = 1; }
            }
            if (!found) { PyErr_Format(PyExc_TypeError, "prepare_record got an unexpected keyword argument"); return NULL; }
        }
    }
    if (a[0] == NULL) { PyErr_SetString(PyExc_TypeError, "prepare_record needs msg"); return NULL; }
    PyObject *msg = a[0];
    int64_t max_size = 4 * 1024 * 1024;
    if (a[2] != NULL && as_i64(a[2], &max_size) < 0) return NULL;
    int prop_crc = PyObject_IsTrue(a[3]);
    if (prop_crc < 0) return NULL;

    PyObject *topic = NULL, *properties = NULL, *props = NULL, *body = NULL, *born = NULL, *store = NULL,
             *tail = NULL, *known = NULL, *result = NULL;
    PyObject *born_b = NULL, *store_b = NULL;
    Py_buffer bv = {0};
    int have_bv = 0;

    topic = msg_attr(msg, s_topic);
    if (topic == NULL) goto done;
    properties = msg_attr(msg, s_properties);
    if (properties == NULL) goto done;
    if (a[1] == Py_None) {
        props = encode_properties(properties);
    } else {
        props = a[1];
        Py_INCREF(props);
    }
    if (props == NULL) goto done;
    if (!PyUnicode_Check(props)) { PyErr_SetString(PyExc_TypeError, "properties string must be str"); goto done; }
    if (prop_crc && PyUnicode_GET_LENGTH(props) > 0 &&
        PyUnicode_READ_CHAR(props, PyUnicode_GET_LENGTH(props) - 1) != 0x02) {
        PyObject *sep = PyUnicode_FromOrdinal(0x02);
        if (sep == NULL) goto done;
        PyObject *joined = PyUnicode_Concat(props, sep);
        Py_DECREF(sep);
        if (joined == NULL) goto done;
        Py_SETREF(props, joined);
    }
    Py_ssize_t props_text_len;
    const char *props_utf8 = PyUnicode_AsUTF8AndSize(props, &props_text_len);
    if (props_utf8 == NULL) goto done;
    Py_ssize_t props_len = props_text_len + (prop_crc ? CRC32_RESERVED_LEN : 0);

    body = msg_attr(msg, s_body);
    if (body == NULL) goto done;
    if (PyObject_GetBuffer(body, &bv, PyBUF_SIMPLE) < 0) goto done;
    have_bv = 1;
    Py_ssize_t body_len = bv.len;
    if (body_len > max_size) {
        record_error("message body size %zd exceeds maxMessageSize %lld", body_len, (long long)max_size);
        goto done;
    }
    if (props_len > 32767) {
        record_error("properties size %zd exceeds 32767 bytes", props_len);
        goto done;
    }
    if (!PyUnicode_Check(topic)) { PyErr_SetString(PyExc_TypeError, "topic must be str"); goto done; }
    Py_ssize_t topic_len;
    const char *topic_utf8 = PyUnicode_AsUTF8AndSize(topic, &topic_len);
    if (topic_utf8 == NULL) goto done;
    if (topic_len > 32767) {
        record_error("topic length %zd too long", topic_len);
        goto done;
    }
    int v2 = topic_len > 127;
    born = msg_attr(msg, s_born_host);
    if (born == NULL) goto done;
    born_b = host_bytes(born);
    if (born_b == NULL) goto done;
    store = msg_attr(msg, s_store_host);
    if (store == NULL) goto done;
    store_b = host_bytes(store);
    if (store_b == NULL) goto done;
    Py_ssize_t born_len = PyBytes_GET_SIZE(born_b), store_len = PyBytes_GET_SIZE(store_b);
    int64_t sys_flag;
    if (attr_i(msg, s_sys_flag, &sys_flag, 64) < 0) goto done;
    sys_flag &= ~(int64_t)HOST_FLAGS;
    if (born_len == 20) sys_flag |= BORNHOST_V6_FLAG;
    if (store_len == 20) sys_flag |= STOREHOST_V6_FLAG;

    Py_ssize_t tail_len = (v2 ? 2 : 1) + topic_len + 2 + props_len;
    tail = PyBytes_FromStringAndSize(NULL, tail_len);
    if (tail == NULL) goto done;
    unsigned char *t = (unsigned char *)PyBytes_AS_STRING(tail);
    if (v2) { put_i16(t, (int32_t)topic_len); t += 2; } else { *t++ = (unsigned char)topic_len; }
    memcpy(t, topic_utf8, (size_t)topic_len);
    t += topic_len;
    put_i16(t, (int32_t)props_len);
    t += 2;
    memcpy(t, props_utf8, (size_t)props_text_len);
    if (prop_crc) memset(t + props_text_len, 0, CRC32_RESERVED_LEN);

    Py_ssize_t total = 72 + born_len + store_len + body_len + tail_len;
    if (total > max_size + 65536) {
        record_error("encoded record size %zd exceeds the limit %lld", total, (long long)(max_size + 65536));
        goto done;
    }
    if (a[1] == Py_None) {
        known = known_properties(topic, properties, props_utf8, props_text_len);
        if (known == NULL) goto done;
    } else {
        known = Py_None;
        Py_INCREF(known);
    }
    int64_t crc = 0;
    if (body_len > 0 && body_crc((const char *)bv.buf, body_len, &crc) < 0) goto done;
    result = PyTuple_New(9);
    if (result == NULL) goto done;
    PyObject *items[4] = {PyLong_FromSsize_t(total), PyLong_FromLong(v2 ? MAGIC_V2 : MAGIC_V1),
                          PyLong_FromLongLong(crc), PyLong_FromLongLong(sys_flag)};
    for (int i = 0; i < 4; i++) {
        if (items[i] == NULL) {
            for (int j = 0; j < 4; j++) Py_XDECREF(items[j]);
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, i, items[i]);
    }
    PyTuple_SET_ITEM(result, 4, Py_NewRef(born_b));
    PyTuple_SET_ITEM(result, 5, Py_NewRef(store_b));
    PyTuple_SET_ITEM(result, 6, Py_NewRef(tail));
    PyTuple_SET_ITEM(result, 7, Py_NewRef(props));
    PyTuple_SET_ITEM(result, 8, Py_NewRef(known));
done:
    if (have_bv) PyBuffer_Release(&bv);
    Py_XDECREF(topic); Py_XDECREF(properties); Py_XDECREF(props); Py_XDECREF(body); Py_XDECREF(born);
    Py_XDECREF(store); Py_XDECREF(tail); Py_XDECREF(known); Py_XDECREF(born_b); Py_XDECREF(store_b);
    return result;
}

/* ------------------------------------------------------------------ write_record / record_parts */

typedef struct {
    Py_ssize_t total;
    int64_t magic, crc, sys_flag;
    const char *born, *store, *tail;
    Py_ssize_t born_len, store_len, tail_len;
} Prepared;

static int unpack_prepared(PyObject *rec, Prepared *p) {
    if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) != 9) {
        PyErr_SetString(PyExc_TypeError, "rec must be a prepare_record tuple");
        return -1;
    }
    int64_t total;
    if (as_i64(PyTuple_GET_ITEM(rec, 0), &total) < 0 || as_i32(PyTuple_GET_ITEM(rec, 1), &p->magic) < 0 ||
        as_i32(PyTuple_GET_ITEM(rec, 2), &p->crc) < 0 || as_i32(PyTuple_GET_ITEM(rec, 3), &p->sys_flag) < 0) {
        return -1;
    }
    p->total = (Py_ssize_t)total;
    PyObject *b = PyTuple_GET_ITEM(rec, 4), *s = PyTuple_GET_ITEM(rec, 5), *t = PyTuple_GET_ITEM(rec, 6);
    if (!PyBytes_Check(b) || !PyBytes_Check(s) || !PyBytes_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "rec must be a prepare_record tuple");
        return -1;
    }
    p->born = PyBytes_AS_STRING(b); p->born_len = PyBytes_GET_SIZE(b);
    p->store = PyBytes_AS_STRING(s); p->store_len = PyBytes_GET_SIZE(s);
    p->tail = PyBytes_AS_STRING(t); p->tail_len = PyBytes_GET_SIZE(t);
    int want_born = (p->sys_flag & BORNHOST_V6_FLAG) ? 20 : 8, want_store = (p->sys_flag & STOREHOST_V6_FLAG) ? 20 : 8;
    if (p->born_len != want_born || p->store_len != want_store) {
        PyErr_SetString(struct_error, "host bytes do not match the SYSFLAG host bits");
        return -1;
    }
    return 0;
}

/* The record header (72 + host bytes) into out; body_len from msg.body's buffer. */
static Py_ssize_t write_header(unsigned char *out, const Prepared *p, PyObject *msg, int64_t queue_offset,
                               int64_t phy, int64_t store_ts, Py_ssize_t body_len) {
    int64_t queue_id, flag, born_ts, reconsume, prepared;
    if (attr_i(msg, s_queue_id, &queue_id, 32) < 0 || attr_i(msg, s_flag, &flag, 32) < 0 ||
        attr_i(msg, s_born_timestamp, &born_ts, 64) < 0 || attr_i(msg, s_reconsume_times, &reconsume, 32) < 0 ||
        attr_i(msg, s_prepared_transaction_offset, &prepared, 64) < 0) {
        return -1;
    }
    if (body_len > INT32_MAX) { PyErr_SetString(struct_error, "argument out of range"); return -1; }
    unsigned char *o = out;
    put_i32(o, p->total); put_i32(o + 4, p->magic); put_i32(o + 8, p->crc); put_i32(o + 12, queue_id);
    put_i32(o + 16, flag); put_i64(o + 20, queue_offset); put_i64(o + 28, phy); put_i32(o + 36, p->sys_flag);
    put_i64(o + 40, born_ts);
    o += 48;
    memcpy(o, p->born, (size_t)p->born_len);
    o += p->born_len;
    put_i64(o, store_ts);
    o += 8;
    memcpy(o, p->store, (size_t)p->store_len);
    o += p->store_len;
    put_i32(o, reconsume); put_i64(o + 4, prepared); put_i32(o + 12, body_len);
    return (o + 16) - out;
}

static const char HEX[] = "0123456789ABCDEF";

static PyObject *msg_id_of(const char *store, Py_ssize_t store_len, int64_t phy) {
    unsigned char raw[28];
    memcpy(raw, store, (size_t)store_len);
    put_i64(raw + store_len, phy);
    Py_ssize_t n = store_len + 8;
    PyObject *out = PyUnicode_New(n * 2, 0x7F);
    if (out == NULL) return NULL;
    char *d = (char *)PyUnicode_DATA(out);
    for (Py_ssize_t i = 0; i < n; i++) { d[2 * i] = HEX[raw[i] >> 4]; d[2 * i + 1] = HEX[raw[i] & 15]; }
    return out;
}

static int parse_i64_args(PyObject *const *args, Py_ssize_t from, Py_ssize_t count, int64_t *out) {
    for (Py_ssize_t i = 0; i < count; i++) {
        if (as_i64(args[from + i], &out[i]) < 0) return -1;
    }
    return 0;
}

static PyObject *hp_write_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) { PyErr_SetString(PyExc_TypeError, "write_record(buf, pos, rec, msg, queue_offset, phy, store_ts)"); return NULL; }
    Prepared p;
    int64_t pos, v[3];
    if (as_i64(args[1], &pos) < 0 || unpack_prepared(args[2], &p) < 0 || parse_i64_args(args, 4, 3, v) < 0) return NULL;
    Py_buffer out, bv;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) return NULL;
    if (pos < 0 || pos > out.len || p.total < 0 || pos + p.total > out.len) {
        PyErr_Format(PyExc_ValueError, "record of %zd bytes at %lld does not fit a buffer of %zd", p.total,
                     (long long)pos, out.len);
        PyBuffer_Release(&out);
        return NULL;
    }
    PyObject *body = PyObject_GetAttr(args[3], s_body);
    if (body == NULL) { PyBuffer_Release(&out); return NULL; }
    if (PyObject_GetBuffer(body, &bv, PyBUF_SIMPLE) < 0) { Py_DECREF(body); PyBuffer_Release(&out); return NULL; }
    unsigned char *dst = (unsigned char *)out.buf + pos;
    Py_ssize_t hlen = 72 + p.born_len + p.store_len;
    PyObject *result = NULL;
    if (hlen + bv.len + p.tail_len != p.total) {
        PyErr_SetString(PyExc_ValueError, "rec does not describe this message (sizes differ)");
    } else if (write_header(dst, &p, args[3], v[0], v[1], v[2], bv.len) >= 0) {
        memcpy(dst + hlen, bv.buf, (size_t)bv.len);
        memcpy(dst + hlen + bv.len, p.tail, (size_t)p.tail_len);
        result = msg_id_of(p.store, p.store_len, v[1]);
    }
    PyBuffer_Release(&bv);
    Py_DECREF(body);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *hp_record_parts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) { PyErr_SetString(PyExc_TypeError, "record_parts(rec, msg, queue_offset, phy, store_ts)"); return NULL; }
    Prepared p;
    int64_t v[3];
    if (unpack_prepared(args[0], &p) < 0 || parse_i64_args(args, 2, 3, v) < 0) return NULL;
    PyObject *body = PyObject_GetAttr(args[1], s_body);
    if (body == NULL) return NULL;
    Py_buffer bv;
    if (PyObject_GetBuffer(body, &bv, PyBUF_SIMPLE) < 0) { Py_DECREF(body); return NULL; }
    Py_ssize_t body_len = bv.len;
    PyBuffer_Release(&bv);
    Py_ssize_t hlen = 72 + p.born_len + p.store_len;
    PyObject *header = PyBytes_FromStringAndSize(NULL, hlen);
    if (header == NULL || write_header((unsigned char *)PyBytes_AS_STRING(header), &p, args[1], v[0], v[1], v[2],
                                       body_len) < 0) {
        Py_XDECREF(header);
        Py_DECREF(body);
        return NULL;
    }
    PyObject *tail = PyTuple_GET_ITEM(args[0], 6);
    PyObject *r = PyTuple_Pack(3, header, body, tail);
    Py_DECREF(header);
    Py_DECREF(body);
    return r;
}

static PyObject *hp_offset_msg_id(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) > 20) {
        PyErr_SetString(PyExc_TypeError, "offset_msg_id(store_raw: bytes, commit_log_offset)");
        return NULL;
    }
    int64_t phy;
    if (as_i64(args[1], &phy) < 0) return NULL;
    return msg_id_of(PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]), phy);
}

/* ------------------------------------------------------------------ dispatch decoder */

static PyObject *hp_decode_dispatch_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) { PyErr_SetString(PyExc_TypeError, "decode_dispatch_fields(buf, pos, limit)"); return NULL; }
    int64_t pos, limit;
    if (as_i64(args[1], &pos) < 0 || as_i64(args[2], &limit) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    int64_t n = view.len;
    PyObject *result = NULL;
    if (pos < 0 || pos > n || pos + SYS_FLAG_POS + 4 > n) goto none;
    int flags = b[pos + SYS_FLAG_POS + 3] & HOST_FLAGS;
    int born_len = (flags & BORNHOST_V6_FLAG) ? 20 : 8, store_len = (flags & STOREHOST_V6_FLAG) ? 20 : 8;
    int64_t hsize = 72 + born_len + store_len;
    if (pos + hsize > n) goto none;
    const unsigned char *h = b + pos;
    int32_t total = get_i32(h), magic = get_i32(h + 4), queue_id = get_i32(h + 12);
    int64_t queue_offset = get_i64(h + 20), phy = get_i64(h + 28);
    int32_t sys_flag = get_i32(h + 36);
    int64_t store_ts = get_i64(h + 48 + born_len);
    int64_t prepared = get_i64(h + 48 + born_len + 8 + store_len + 4);
    int32_t body_len = get_i32(h + hsize - 4);
    int64_t end = pos + (int64_t)total;
    if (total <= 0 || end > limit || end > n || body_len < 0) goto none;
    int64_t p = pos + hsize + body_len;
    int32_t topic_len;
    if (magic == MAGIC_V1) {
        if (p + 1 > end) goto none;
        topic_len = b[p];
        if (topic_len > 127) goto none;
        p += 1;
    } else if (magic == MAGIC_V2) {
        if (p + 2 > end) goto none;
        topic_len = get_i16(b + p);
        p += 2;
    } else {
        goto none;
    }
    if (topic_len < 0 || p + topic_len + 2 > end) goto none;
    PyObject *topic = PyUnicode_DecodeUTF8((const char *)b + p, topic_len, "replace");
    if (topic == NULL) goto out;
    p += topic_len;
    int32_t props_len = get_i16(b + p);
    p += 2;
    if (props_len < 0 || p + props_len != end) { Py_DECREF(topic); goto none; }
    PyObject *props = PyUnicode_DecodeUTF8((const char *)b + p, props_len, "replace");
    if (props == NULL) { Py_DECREF(topic); goto out; }
    result = Py_BuildValue("(iNiLLiLLN)", total, topic, queue_id, (long long)queue_offset, (long long)phy, sys_flag,
                           (long long)store_ts, (long long)prepared, props);
    goto out;
none:
    result = Py_None;
    Py_INCREF(result);
out:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *hp_body_crc_matches(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_initialised()) return NULL;
    if (nargs != 3) { PyErr_SetString(PyExc_TypeError, "body_crc_matches(buf, pos, sys_flag)"); return NULL; }
    int64_t pos, sys_flag;
    if (as_i64(args[1], &pos) < 0 || as_i64(args[2], &sys_flag) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    int64_t body_pos = pos + 72 + ((sys_flag & BORNHOST_V6_FLAG) ? 20 : 8) + ((sys_flag & STOREHOST_V6_FLAG) ? 20 : 8);
    PyObject *result = NULL;
    if (pos < 0 || body_pos > view.len) {
        PyErr_SetString(struct_error, "unpack_from requires a buffer of more bytes");
    } else {
        int32_t body_len = get_i32((const unsigned char *)view.buf + body_pos - 4);
        if (body_len <= 0) {
            result = Py_True;
            Py_INCREF(result);
        } else {
            int64_t avail = view.len - body_pos;
            Py_ssize_t len = body_len < avail ? body_len : (Py_ssize_t)avail;
            int64_t crc;
            if (body_crc((const char *)view.buf + body_pos, len, &crc) == 0) {
                result = PyBool_FromLong(crc == get_i32((const unsigned char *)view.buf + pos + 8));
            }
        }
    }
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ consume queue units */

static PyObject *hp_put_cq_unit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) { PyErr_SetString(PyExc_TypeError, "put_cq_unit(buf, pos, phy_offset, size, tags_code)"); return NULL; }
    int64_t pos, phy, size, tags;
    if (as_i64(args[1], &pos) < 0 || as_i64(args[2], &phy) < 0 || as_i32(args[3], &size) < 0 ||
        as_i64(args[4], &tags) < 0) return NULL;
    Py_buffer out;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) return NULL;
    if (pos < 0 || pos > out.len || pos + 20 > out.len) {
        PyErr_Format(struct_error, "pack_into requires a buffer of at least %lld bytes", (long long)(pos + 20));
        PyBuffer_Release(&out);
        return NULL;
    }
    unsigned char *d = (unsigned char *)out.buf + pos;
    put_i64(d, phy); put_i32(d + 8, size); put_i64(d + 12, tags);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyObject *hp_put_bcq_unit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "put_bcq_unit(buf, pos, phy, size, tags, store_time, base, batch_size)");
        return NULL;
    }
    int64_t pos, phy, size, tags, store_time, base, batch;
    if (as_i64(args[1], &pos) < 0 || as_i64(args[2], &phy) < 0 || as_i32(args[3], &size) < 0 ||
        as_i64(args[4], &tags) < 0 || as_i64(args[5], &store_time) < 0 || as_i64(args[6], &base) < 0 ||
        as_i16(args[7], &batch) < 0) return NULL;
    Py_buffer out;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) return NULL;
    if (pos < 0 || pos > out.len || pos + 46 > out.len) {
        PyErr_Format(struct_error, "pack_into requires a buffer of at least %lld bytes", (long long)(pos + 46));
        PyBuffer_Release(&out);
        return NULL;
    }
    unsigned char *d = (unsigned char *)out.buf + pos;
    put_i64(d, phy); put_i32(d + 8, size); put_i64(d + 12, tags); put_i64(d + 20, store_time);
    put_i64(d + 28, base); put_i16(d + 36, (int32_t)batch); put_i32(d + 38, -1); put_i32(d + 42, 0);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* End of the run of valid units that starts at `start` (spec §5.5 / §6.1 validity, unit by unit):
 * SimpleCQ phyOffset >= 0 and size > 0; BatchCQ also msgBaseOffset >= 0 and batchSize > 0. The
 * first unit failing them (or the first that does not fit below min(limit, len(buf))) is the end. */
/* ------------------------------------------------------------------ recovery start */

static PyObject *hp_first_record_stored_after(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "first_record_stored_after(buf, pos, limit, timestamp)");
        return NULL;
    }
    int64_t pos, limit, ts;
    if (as_i64(args[1], &pos) < 0 || as_i64(args[2], &limit) < 0 || as_i64(args[3], &ts) < 0) return NULL;
    if (pos < 0) { PyErr_SetString(PyExc_ValueError, "pos must be >= 0"); return NULL; }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    if (limit > view.len) limit = view.len;
    Py_BEGIN_ALLOW_THREADS
    while (pos + SYS_FLAG_POS + 4 <= limit) {
        const unsigned char *h = b + pos;
        int32_t total = get_i32(h), magic = get_i32(h + 4);
        if (magic != MAGIC_V1 && magic != MAGIC_V2) break;
        int born_len = (h[SYS_FLAG_POS + 3] & BORNHOST_V6_FLAG) ? 20 : 8;
        if (total < 56 + born_len || pos + total > limit) break;
        if (get_i64(h + 48 + born_len) > ts) break;
        pos += total;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromLongLong((long long)pos);
}

static PyObject *hp_valid_units_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "valid_units_end(buf, start, limit, batch=False)");
        return NULL;
    }
    int64_t start, limit;
    if (as_i64(args[1], &start) < 0 || as_i64(args[2], &limit) < 0) return NULL;
    int batch = nargs == 4 ? PyObject_IsTrue(args[3]) : 0;
    if (batch < 0) return NULL;
    if (start < 0) { PyErr_SetString(PyExc_ValueError, "start must be >= 0"); return NULL; }
    Py_buffer in;
    if (PyObject_GetBuffer(args[0], &in, PyBUF_SIMPLE) < 0) return NULL;
    const int64_t unit = batch ? 46 : 20;
    int64_t end = limit < (int64_t)in.len ? limit : (int64_t)in.len;
    const unsigned char *d = (const unsigned char *)in.buf;
    int64_t pos = start;
    Py_BEGIN_ALLOW_THREADS
    while (pos + unit <= end) {
        const unsigned char *u = d + pos;
        if (get_i64(u) < 0 || get_i32(u + 8) <= 0) break;
        if (batch && (get_i64(u + 28) < 0 || get_i16(u + 36) <= 0)) break;
        pos += unit;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    return PyLong_FromLongLong(pos);
}

/* ------------------------------------------------------------------ index entries */

/* Hash of topic + "#" + key[from:to] (Java hashCode over the whole string, continued from the hash
 * of "topic#"), -1 on a lone surrogate. */
static int key_hash_span(uint32_t prefix_hash, PyObject *key, Py_ssize_t from, Py_ssize_t to, int32_t *out) {
    uint32_t h = prefix_hash;
    if (java_hash_range(key, from, to, &h) < 0) return -1;
    *out = key_hash_of(h);
    return 0;
}

#define MAX_KEYS 64

/* The index entries of one record into an index file's bytes b[0:blen] (index_put_keys of hot_py.py);
 * the counters are the file's live header values, updated in place. Returns 0 (written/count set),
 * -1 with an error set, or 1 when the keys need the Python reference (a non-str topic or key, a lone
 * surrogate, more than MAX_KEYS keys, a non-positive slot count), nothing written. */
static int index_put_keys_into(unsigned char *b, Py_ssize_t blen, int64_t slot_num, int64_t index_num, int64_t *n_io,
                               int64_t *begin_ts_io, int64_t *begin_phy_io, int64_t *slot_count_io, PyObject *topic,
                               PyObject *uniq, PyObject *keys, int64_t phy, int64_t ts, int64_t skip, int *written_out,
                               int *count_out) {
    if (slot_num <= 0 || !PyUnicode_Check(topic) || (uniq != Py_None && !PyUnicode_Check(uniq)) ||
        (keys != Py_None && !PyUnicode_Check(keys))) {
        return 1;
    }
    uint32_t prefix = 0;
    if (java_hash_continue(topic, &prefix) < 0) return 1;
    prefix = 31u * prefix + '#';
    int32_t hashes[MAX_KEYS];
    int count = 0;
    if (uniq != Py_None) {
        if (key_hash_span(prefix, uniq, 0, PyUnicode_GET_LENGTH(uniq), &hashes[count]) < 0) return 1;
        count++;
    }
    if (keys != Py_None) {
        Py_ssize_t len = PyUnicode_GET_LENGTH(keys), start = 0;
        int kind = PyUnicode_KIND(keys);
        const void *data = PyUnicode_DATA(keys);
        for (Py_ssize_t i = 0; i <= len; i++) {
            if (i == len || PyUnicode_READ(kind, data, i) == ' ') {
                if (i > start) {
                    if (count == MAX_KEYS) return 1;
                    if (key_hash_span(prefix, keys, start, i, &hashes[count]) < 0) return 1;
                    count++;
                }
                start = i + 1;
            }
        }
    }
    int64_t n = *n_io, begin_ts = *begin_ts_io, begin_phy = *begin_phy_io, slot_count = *slot_count_io;
    int64_t entries_base = INDEX_HEADER_SIZE + slot_num * 4;
    if (blen < entries_base) {
        PyErr_SetString(struct_error, "index buffer is smaller than its header and slots");
        return -1;
    }
    int64_t room = index_num - n;
    int written = 0;
    for (int k = (int)(skip < 0 ? 0 : skip); k < count; k++) {
        if (written >= room) break;
        int64_t epos = entries_base + n * 20;
        if (epos + 20 > blen) {
            PyErr_SetString(struct_error, "index entry beyond the end of the buffer");
            return -1;
        }
        int32_t kh = hashes[k];
        int64_t spos = INDEX_HEADER_SIZE + (kh % slot_num) * 4;
        int64_t slot_value = get_i32(b + spos);
        if (slot_value <= 0 || slot_value > n) {
            slot_value = 0;
            slot_count++;
        }
        int64_t time_diff = 0;
        if (begin_ts > 0) {
            time_diff = (ts - begin_ts) / 1000;
            if (time_diff < 0) time_diff = 0;
            if (time_diff > INT32_MAX_V) time_diff = INT32_MAX_V;
        }
        if (n <= 1) {
            begin_phy = phy;
            begin_ts = ts;
        }
        unsigned char *e = b + epos;
        put_i32(e, kh); put_i64(e + 4, phy); put_i32(e + 12, time_diff); put_i32(e + 16, slot_value);
        put_i32(b + spos, n);
        n++;
        written++;
    }
    if (written) {
        put_i64(b, begin_ts); put_i64(b + 8, ts); put_i64(b + 16, begin_phy); put_i64(b + 24, phy);
        put_i32(b + 32, slot_count); put_i32(b + 36, n);
    }
    *n_io = n; *begin_ts_io = begin_ts; *begin_phy_io = begin_phy; *slot_count_io = slot_count;
    *written_out = written;
    *count_out = count;
    return 0;
}

static PyObject *hp_index_put_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_initialised()) return NULL;
    if (nargs != 12 && nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "index_put_keys(buf, hash_slot_num, index_num, index_count, begin_timestamp, "
                                         "begin_phy_offset, hash_slot_count, topic, uniq_key, keys, phy_offset, "
                                         "store_timestamp, skip=0)");
        return NULL;
    }
    int64_t slot_num, index_num, n, begin_ts, begin_phy, slot_count, phy, ts, skip = 0;
    if (as_i64(args[1], &slot_num) < 0 || as_i64(args[2], &index_num) < 0 || as_i64(args[3], &n) < 0 ||
        as_i64(args[4], &begin_ts) < 0 || as_i64(args[5], &begin_phy) < 0 || as_i64(args[6], &slot_count) < 0 ||
        as_i64(args[10], &phy) < 0 || as_i64(args[11], &ts) < 0 || (nargs == 13 && as_i64(args[12], &skip) < 0)) {
        return NULL;
    }
    if (n < 1 || n > index_num) {
        PyErr_SetString(PyExc_ValueError, "index_count must be between 1 and index_num");
        return NULL;
    }
    /* the keys first (a fallback writes nothing), then the buffer */
    if (slot_num <= 0 || !PyUnicode_Check(args[7]) || (args[8] != Py_None && !PyUnicode_Check(args[8])) ||
        (args[9] != Py_None && !PyUnicode_Check(args[9]))) {
        return PyObject_Vectorcall(py_index_put_keys, args, (size_t)nargs, NULL);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) return NULL;
    int written = 0, count = 0;
    int rc = index_put_keys_into((unsigned char *)view.buf, view.len, slot_num, index_num, &n, &begin_ts, &begin_phy,
                                 &slot_count, args[7], args[8], args[9], phy, ts, skip, &written, &count);
    PyBuffer_Release(&view);
    if (rc < 0) return NULL;
    if (rc > 0) return PyObject_Vectorcall(py_index_put_keys, args, (size_t)nargs, NULL);
    return Py_BuildValue("(iiLLLL)", written, count, (long long)begin_ts, (long long)begin_phy,
                         (long long)slot_count, (long long)n);
}


/* ------------------------------------------------------------------ check_message */

/* 1 when text is an exact str holding no 0x01/0x02 and encodable as UTF-8 (no lone surrogate), 0 when
 * in doubt (the reference then gives the verdict). */
static int text_ok(PyObject *text) {
    if (!PyUnicode_CheckExact(text)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = (const Py_UCS1 *)data;
        return memchr(d, 0x01, (size_t)n) == NULL && memchr(d, 0x02, (size_t)n) == NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == 0x01 || c == 0x02 || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    }
    return 1;
}

/* 1 when o is an exact int in [lo, hi] (bool and int subclasses are left to the reference). */
static int int_ok(PyObject *obj, PyObject *name, int64_t lo, int64_t hi) {
    PyObject *o = msg_attr(obj, name);
    if (o == NULL) { PyErr_Clear(); return 0; }
    int ok = 0;
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred()) PyErr_Clear();
        else ok = !overflow && v >= lo && v <= hi;
    }
    Py_DECREF(o);
    return ok;
}

/* 1 when the host tuple is one the reference check_host accepted before (or accepts now), 0 in doubt;
 * -1 with the reference's exception set. */
static int host_ok(PyObject *msg, PyObject *name) {
    PyObject *host = msg_attr(msg, name);
    if (host == NULL) { PyErr_Clear(); return 0; }
    int ok = 0;
    if (PyTuple_CheckExact(host) && PyTuple_GET_SIZE(host) == 2 && PyUnicode_CheckExact(PyTuple_GET_ITEM(host, 0)) &&
        PyLong_CheckExact(PyTuple_GET_ITEM(host, 1))) {
        /* exact types: equal tuples are equal values (no 5.0 == 5 or True == 1 aliasing) */
        ok = PyDict_Contains(valid_hosts, host);
        if (ok == 0) {
            PyObject *r = PyObject_CallFunctionObjArgs(py_check_host, name, host, NULL);
            if (r == NULL) {
                ok = -1;
            } else {
                Py_DECREF(r);
                if (PyDict_GET_SIZE(valid_hosts) >= VALID_HOSTS_MAX) PyDict_Clear(valid_hosts);
                ok = PyDict_SetItem(valid_hosts, host, Py_True) < 0 ? -1 : 1;
            }
        }
    }
    Py_DECREF(host);
    return ok;
}

/* The fast verdict of validate.check_message: 1 valid, 0 in doubt, -1 error set. */
static int message_ok(PyObject *msg, int properties_given) {
    PyObject *topic = msg_attr(msg, s_topic);
    if (topic == NULL) { PyErr_Clear(); return 0; }
    int ok = text_ok(topic) && PyUnicode_GET_LENGTH(topic) > 0;
    Py_DECREF(topic);
    if (!ok) return 0;
    PyObject *body = msg_attr(msg, s_body);
    if (body == NULL) { PyErr_Clear(); return 0; }
    /* a memoryview of wider items or strided: in doubt (validate.check_message refuses it) */
    ok = PyBytes_CheckExact(body) || PyByteArray_CheckExact(body) ||
         (PyMemoryView_Check(body) && PyMemoryView_GET_BUFFER(body)->itemsize == 1 &&
          PyBuffer_IsContiguous(PyMemoryView_GET_BUFFER(body), 'C'));
    Py_DECREF(body);
    if (!ok) return 0;
    if (!int_ok(msg, s_queue_id, INT32_MIN, INT32_MAX) || !int_ok(msg, s_flag, INT32_MIN, INT32_MAX) ||
        !int_ok(msg, s_sys_flag, INT32_MIN, INT32_MAX) || !int_ok(msg, s_reconsume_times, INT32_MIN, INT32_MAX) ||
        !int_ok(msg, s_born_timestamp, INT64_MIN, INT64_MAX) ||
        !int_ok(msg, s_prepared_transaction_offset, INT64_MIN, INT64_MAX)) {
        return 0;
    }
    PyObject *keep = msg_attr(msg, s_keep_store_timestamp);
    if (keep == NULL) { PyErr_Clear(); return 0; }
    ok = keep == Py_False;
    if (!ok && keep == Py_True) ok = int_ok(msg, s_store_timestamp, INT64_MIN, INT64_MAX);
    Py_DECREF(keep);
    if (!ok) return 0;
    int h = host_ok(msg, s_born_host);
    if (h <= 0) return h;
    h = host_ok(msg, s_store_host);
    if (h <= 0) return h;
    if (properties_given) return 1;
    PyObject *props = msg_attr(msg, s_properties);
    if (props == NULL) { PyErr_Clear(); return 0; }
    ok = PyDict_CheckExact(props);
    Py_ssize_t i = 0;
    PyObject *k, *v;
    while (ok && PyDict_Next(props, &i, &k, &v)) {
        ok = text_ok(k) && PyUnicode_GET_LENGTH(k) > 0 && (v == Py_None || text_ok(v));
    }
    Py_DECREF(props);
    return ok;
}

static PyObject *hp_check_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_initialised()) return NULL;
    if (nargs != 1 && nargs != 2) { PyErr_SetString(PyExc_TypeError, "check_message(msg, properties_given=False)"); return NULL; }
    int given = 0;
    if (nargs == 2 && (given = PyObject_IsTrue(args[1])) < 0) return NULL;
    int ok = message_ok(args[0], given);
    if (ok < 0) return NULL;
    if (ok) Py_RETURN_NONE;
    return PyObject_Vectorcall(py_check_message, args, (size_t)nargs, NULL);
}

/* ------------------------------------------------------------------ scans (search/rebuild jobs) */

#define INNER_BATCH_FLAG 0x80
#define COMPRESSED_FLAG 0x1
#define VERDICT_CACHE_MAX 65536

static inline int64_t store_ts_at(const unsigned char *h) {
    return get_i64(h + ((h[SYS_FLAG_POS + 3] & BORNHOST_V6_FLAG) ? 68 : 56));
}

static PyObject *hp_hop_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) { PyErr_SetString(PyExc_TypeError, "hop_records(buf, pos, limit, split_bytes)"); return NULL; }
    int64_t pos, limit, split;
    if (as_i64(args[1], &pos) < 0 || as_i64(args[2], &limit) < 0 || as_i64(args[3], &split) < 0) return NULL;
    if (pos < 0 || split <= 0) { PyErr_SetString(PyExc_ValueError, "pos must be >= 0 and split_bytes > 0"); return NULL; }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    if (limit > view.len) limit = view.len;
    PyObject *splits = PyList_New(0), *first = PyList_New(0), *last = PyList_New(0), *result = NULL;
    if (splits == NULL || first == NULL || last == NULL) goto done;
#define APPEND_I64(list, v) do { PyObject *o_ = PyLong_FromLongLong((long long)(v)); \
        if (o_ == NULL || PyList_Append(list, o_) < 0) { Py_XDECREF(o_); goto done; } Py_DECREF(o_); } while (0)
    APPEND_I64(splits, pos);
    int64_t records = 0, prev = -1, next_split = pos + split;
    int range_open = 0;
    while (limit - pos >= 8) {
        const unsigned char *h = b + pos;
        int32_t total = get_i32(h), magic = get_i32(h + 4);
        if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < 80 || total > limit - pos) break;
        if (!range_open) { APPEND_I64(first, store_ts_at(h)); range_open = 1; }
        prev = pos;
        pos += total;
        records++;
        if (pos >= next_split && limit - pos >= 8) {
            APPEND_I64(last, store_ts_at(b + prev));
            range_open = 0;
            APPEND_I64(splits, pos);
            next_split = pos + split;
        }
    }
    if (range_open) APPEND_I64(last, store_ts_at(b + prev));
    while (PyList_GET_SIZE(first) < PyList_GET_SIZE(splits)) { APPEND_I64(first, -1); APPEND_I64(last, -1); }
#undef APPEND_I64
    result = Py_BuildValue("(OOOLL)", splits, first, last, (long long)pos, (long long)records);
done:
    Py_XDECREF(splits); Py_XDECREF(first); Py_XDECREF(last);
    PyBuffer_Release(&view);
    return result;
}

/* What the reput decoder (hp_decode_dispatch_fields) checks and reads, without building objects:
 * 1 for a complete, well-formed record inside limit, 0 otherwise. Kept beside that function rather
 * than shared with it so the store's dispatch path is not touched by the scan's needs. */
typedef struct {
    int32_t total, sys_flag, body_len;
    int64_t store_ts, hsize;
    int64_t topic_pos, props_pos;
    int32_t topic_len, props_len;
} ScanRecord;

static int scan_record(const unsigned char *b, int64_t n, int64_t pos, int64_t limit, ScanRecord *r) {
    if (pos < 0 || pos > n || pos + SYS_FLAG_POS + 4 > n) return 0;
    int flags = b[pos + SYS_FLAG_POS + 3] & HOST_FLAGS;
    int born_len = (flags & BORNHOST_V6_FLAG) ? 20 : 8, store_len = (flags & STOREHOST_V6_FLAG) ? 20 : 8;
    int64_t hsize = 72 + born_len + store_len;
    if (pos + hsize > n) return 0;
    const unsigned char *h = b + pos;
    int32_t total = get_i32(h), magic = get_i32(h + 4);
    int32_t body_len = get_i32(h + hsize - 4);
    int64_t end = pos + (int64_t)total;
    if (total <= 0 || end > limit || end > n || body_len < 0) return 0;
    int64_t p = pos + hsize + body_len;
    int32_t topic_len;
    if (magic == MAGIC_V1) {
        if (p + 1 > end) return 0;
        topic_len = b[p];
        if (topic_len > 127) return 0;
        p += 1;
    } else if (magic == MAGIC_V2) {
        if (p + 2 > end) return 0;
        topic_len = get_i16(b + p);
        p += 2;
    } else {
        return 0;
    }
    if (topic_len < 0 || p + topic_len + 2 > end) return 0;
    r->topic_pos = p;
    r->topic_len = topic_len;
    p += topic_len;
    int32_t props_len = get_i16(b + p);
    p += 2;
    if (props_len < 0 || p + props_len != end) return 0;
    r->props_pos = p;
    r->props_len = props_len;
    r->total = total;
    r->sys_flag = get_i32(h + 36);
    r->store_ts = get_i64(h + 48 + born_len);
    r->hsize = hsize;
    r->body_len = body_len;
    return 1;
}

/* A wanted text (topic or property name) as its UTF-8 bytes. Raw bytes equal to them decode to the
 * text; when the text holds U+FFFD other (invalid) bytes may decode to it too, so those compare the
 * decoded text. A text that cannot be encoded (lone surrogate) never equals decoded bytes. */
typedef struct {
    PyObject *text;
    const char *utf8;
    Py_ssize_t len;
    int decoded_compare;
    int never;
} Wanted;

static int wanted_init(PyObject *text, Wanted *w) {
    w->text = text;
    w->utf8 = NULL;
    w->len = 0;
    w->never = 0;
    w->decoded_compare = 0;
    if (!PyUnicode_Check(text)) { PyErr_SetString(PyExc_TypeError, "expected str"); return -1; }
    w->utf8 = PyUnicode_AsUTF8AndSize(text, &w->len);
    if (w->utf8 == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
        PyErr_Clear();
        w->never = 1;
        return 0;
    }
    w->decoded_compare = PyUnicode_FindChar(text, 0xFFFD, 0, PyUnicode_GET_LENGTH(text), 1) >= 0;
    return 0;
}

/* 1 equal, 0 not, -1 error. */
static int wanted_equals(const Wanted *w, const unsigned char *raw, Py_ssize_t len) {
    if (w->never) return 0;
    if (len == w->len && memcmp(raw, w->utf8, (size_t)len) == 0) return 1;
    if (!w->decoded_compare) return 0;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)raw, len, "replace");
    if (s == NULL) return -1;
    int eq = PyUnicode_Compare(s, w->text) == 0;
    Py_DECREF(s);
    if (PyErr_Occurred()) return -1;
    return eq;
}

static const unsigned char *find_bytes(const unsigned char *hay, Py_ssize_t n, const char *needle, Py_ssize_t m) {
    if (m == 0) return hay;
    if (m > n) return NULL;
    return (const unsigned char *)memmem(hay, (size_t)n, needle, (size_t)m);
}

/* The verdict key of one record's properties: the values decode_properties gives the names (None
 * when absent), one value for one name, else a tuple. New reference or NULL. */
static PyObject *selected_values(const unsigned char *props, int32_t props_len, const Wanted *names, Py_ssize_t count,
                                 int64_t *vpos, int64_t *vlen) {
    for (Py_ssize_t i = 0; i < count; i++) vpos[i] = -1;
    int64_t s = 0;
    while (s <= props_len) {
        const unsigned char *seg = props + s;
        const unsigned char *sep2 = memchr(seg, 0x02, (size_t)(props_len - s));
        int64_t e = sep2 ? (sep2 - props) : props_len;
        const unsigned char *sep1 = memchr(seg, 0x01, (size_t)(e - s));
        if (sep1 != NULL) {
            int64_t klen = sep1 - seg, voff = (sep1 - props) + 1, val_len = e - voff;
            if (klen > 0 && val_len > 0) {
                for (Py_ssize_t i = 0; i < count; i++) {
                    int eq = wanted_equals(&names[i], seg, klen);
                    if (eq < 0) return NULL;
                    if (eq) { vpos[i] = voff; vlen[i] = val_len; }
                }
            }
        }
        s = e + 1;
    }
    PyObject *values[64];
    for (Py_ssize_t i = 0; i < count; i++) {
        if (vpos[i] < 0) {
            values[i] = Py_NewRef(Py_None);
        } else {
            values[i] = PyUnicode_DecodeUTF8((const char *)props + vpos[i], vlen[i], "replace");
            if (values[i] == NULL) {
                for (Py_ssize_t j = 0; j < i; j++) Py_DECREF(values[j]);
                return NULL;
            }
        }
    }
    if (count == 1) return values[0];
    PyObject *t = PyTuple_New(count);
    if (t == NULL) {
        for (Py_ssize_t j = 0; j < count; j++) Py_DECREF(values[j]);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) PyTuple_SET_ITEM(t, i, values[i]);
    return t;
}

static PyObject *hp_select_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_initialised()) return NULL;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "select_records(buf, pos, stop, limit, check_crc, topic, begin_ms, end_ms, "
                                         "names, verdicts, judge, needle)");
        return NULL;
    }
    int64_t pos, stop, limit, begin = 0, end = 0;
    if (as_i64(args[1], &pos) < 0 || as_i64(args[2], &stop) < 0 || as_i64(args[3], &limit) < 0) return NULL;
    int check_crc = PyObject_IsTrue(args[4]);
    if (check_crc < 0) return NULL;
    int has_begin = args[6] != Py_None, has_end = args[7] != Py_None;
    if ((has_begin && as_i64(args[6], &begin) < 0) || (has_end && as_i64(args[7], &end) < 0)) return NULL;
    PyObject *names_obj = args[8], *verdicts = args[9], *judge = args[10], *needle_obj = args[11];
    if (!PyTuple_Check(names_obj) || PyTuple_GET_SIZE(names_obj) > 64 || !PyDict_Check(verdicts)) {
        PyErr_SetString(PyExc_TypeError, "names must be a tuple of at most 64 str, verdicts a dict");
        return NULL;
    }
    Py_ssize_t name_count = PyTuple_GET_SIZE(names_obj);
    Wanted names[64], topic;
    int64_t vpos[64], vlen[64];
    int has_topic = args[5] != Py_None;
    if (has_topic && wanted_init(args[5], &topic) < 0) return NULL;
    for (Py_ssize_t i = 0; i < name_count; i++) {
        if (wanted_init(PyTuple_GET_ITEM(names_obj, i), &names[i]) < 0) return NULL;
    }
    Py_buffer needle = {0};
    int has_needle = needle_obj != Py_None;
    if (has_needle && PyObject_GetBuffer(needle_obj, &needle, PyBUF_SIMPLE) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        if (has_needle) PyBuffer_Release(&needle);
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)view.buf;
    int64_t n = view.len;
    PyObject *hits = PyList_New(0), *deferred = PyList_New(0), *result = NULL;
    int64_t records = 0;
    int stopped = 0;
    if (hits == NULL || deferred == NULL) goto done;
    while (pos < stop) {
        ScanRecord r;
        if (!scan_record(b, n, pos, limit, &r)) { stopped = 1; break; }
        if (check_crc && r.body_len > 0) {
            int64_t crc;
            if (body_crc((const char *)b + pos + r.hsize, r.body_len, &crc) < 0) goto done;
            if (crc != get_i32(b + pos + 8)) { stopped = 1; break; }
        }
        records++;
        int64_t rec_pos = pos;
        pos += r.total;
        if (has_topic) {
            int eq = wanted_equals(&topic, b + r.topic_pos, r.topic_len);
            if (eq < 0) goto done;
            if (!eq) continue;
        }
        if ((has_begin && r.store_ts < begin) || (has_end && r.store_ts > end)) continue;
        const unsigned char *props = b + r.props_pos;
        int kept = 1;
        if ((r.sys_flag & INNER_BATCH_FLAG) && find_bytes(props, r.props_len, "INNER_NUM\x01", 10) != NULL) {
            PyObject *o = PyLong_FromLongLong((long long)rec_pos);
            if (o == NULL || PyList_Append(deferred, o) < 0) { Py_XDECREF(o); goto done; }
            Py_DECREF(o);
            continue;
        }
        if (name_count > 0) {
            PyObject *key = selected_values(props, r.props_len, names, name_count, vpos, vlen);
            if (key == NULL) goto done;
            PyObject *verdict = PyDict_GetItemWithError(verdicts, key);
            if (verdict == NULL) {
                if (PyErr_Occurred()) { Py_DECREF(key); goto done; }
                PyObject *answer = PyObject_CallOneArg(judge, key);
                if (answer == NULL) { Py_DECREF(key); goto done; }
                int truth = PyObject_IsTrue(answer);
                Py_DECREF(answer);
                if (truth < 0) { Py_DECREF(key); goto done; }
                if (PyDict_GET_SIZE(verdicts) >= VERDICT_CACHE_MAX) PyDict_Clear(verdicts);
                verdict = truth ? Py_True : Py_False;
                if (PyDict_SetItem(verdicts, key, verdict) < 0) { Py_DECREF(key); goto done; }
            }
            Py_DECREF(key);
            kept = verdict == Py_True;
        }
        if (kept && has_needle && (r.sys_flag & COMPRESSED_FLAG)) {
            /* the stored bytes are not the text: the caller decompresses and judges the body */
            PyObject *o = PyLong_FromLongLong((long long)rec_pos);
            if (o == NULL || PyList_Append(deferred, o) < 0) { Py_XDECREF(o); goto done; }
            Py_DECREF(o);
            continue;
        }
        if (kept && has_needle &&
            find_bytes(b + rec_pos + r.hsize, r.body_len, (const char *)needle.buf, needle.len) == NULL) kept = 0;
        if (kept) {
            PyObject *o = PyLong_FromLongLong((long long)rec_pos);
            if (o == NULL || PyList_Append(hits, o) < 0) { Py_XDECREF(o); goto done; }
            Py_DECREF(o);
        }
    }
    result = Py_BuildValue("(LLOON)", (long long)pos, (long long)records, hits, deferred, PyBool_FromLong(stopped));
done:
    Py_XDECREF(hits);
    Py_XDECREF(deferred);
    PyBuffer_Release(&view);
    if (has_needle) PyBuffer_Release(&needle);
    return result;
}

/* ------------------------------------------------------------------ put_fast: one call per put */

#define TRANSACTION_PREPARED_TYPE 0x4

/* The fields of msg as new references into f; 0 when one is missing (put_fast declines). */
static int read_fields(PyObject *msg, PyObject *f[N_FIELDS]) {
    PyTypeObject *tp = Py_TYPE(msg);
    if (!layout_current(tp)) learn_layout(tp);
    if (layout.type == tp) {
        for (int i = 0; i < N_FIELDS; i++) {
            PyObject *v = *(PyObject **)((char *)msg + layout.offset[i]);
            if (v == NULL) { for (int j = 0; j < i; j++) Py_CLEAR(f[j]); return 0; }
            f[i] = Py_NewRef(v);
        }
        return 1;
    }
    for (int i = 0; i < N_FIELDS; i++) {
        f[i] = PyObject_GetAttr(msg, *field_names[i]);
        if (f[i] == NULL) { PyErr_Clear(); for (int j = 0; j < i; j++) Py_CLEAR(f[j]); return 0; }
    }
    return 1;
}

/* An exact int in [lo, hi] into *out: 1, or 0 when it is anything else (put_fast declines). */
static int exact_int_value(PyObject *o, int64_t lo, int64_t hi, int64_t *out) {
    if (!PyLong_CheckExact(o)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    if (overflow || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* The raw bytes of a host the reference accepts (an exact (str, int) tuple it accepted once, or
 * accepts now): a new bytes, or NULL with no error set when put_fast must decline.
 * valid_hosts keeps the raw bytes as the value once known (host_ok only asks whether a key is
 * there): messages decoded from the network bring a new but equal tuple each time, which the
 * identity-keyed host_bytes cache misses, so one dict lookup by value answers both questions
 * (exact types: equal tuples are equal values and encode alike). */
static PyObject *fast_host(PyObject *name, PyObject *host) {
    if (!(PyTuple_CheckExact(host) && PyTuple_GET_SIZE(host) == 2 && PyUnicode_CheckExact(PyTuple_GET_ITEM(host, 0)) &&
          PyLong_CheckExact(PyTuple_GET_ITEM(host, 1)))) return NULL;
    PyObject *known = PyDict_GetItemWithError(valid_hosts, host);  /* borrowed */
    if (known != NULL && PyBytes_CheckExact(known)) return Py_NewRef(known);
    if (known == NULL) {
        if (PyErr_Occurred()) { PyErr_Clear(); return NULL; }
        PyObject *r = PyObject_CallFunctionObjArgs(py_check_host, name, host, NULL);
        if (r == NULL) { PyErr_Clear(); return NULL; }
        Py_DECREF(r);
    }
    PyObject *raw = host_bytes(host);
    if (raw == NULL) { PyErr_Clear(); return NULL; }
    if (PyDict_GET_SIZE(valid_hosts) >= VALID_HOSTS_MAX) PyDict_Clear(valid_hosts);
    if (PyDict_SetItem(valid_hosts, host, raw) < 0) PyErr_Clear();  /* only a cache: the put goes on */
    return raw;
}

/* The PROPERTIES string of a dict whose every name (non-empty) and value is an exact str without
 * separators or lone surrogates, with INNER_NUM exactly when ``inner`` (an inner batch's record): the
 * same string as encode_properties, in one checking pass and one copying pass. NULL with no error set
 * otherwise (put_fast declines). */
static PyObject *plain_properties(PyObject *props, int inner) {
    if (!PyDict_CheckExact(props)) return NULL;
    Py_ssize_t i = 0, len = 0;
    PyObject *k, *v;
    Py_UCS4 maxchar = 0x7F;
    while (PyDict_Next(props, &i, &k, &v)) {
        if (!text_ok(k) || PyUnicode_GET_LENGTH(k) == 0 || !text_ok(v)) return NULL;  /* None: not text */
        len += PyUnicode_GET_LENGTH(k) + PyUnicode_GET_LENGTH(v) + 2;
        Py_UCS4 mk = PyUnicode_MAX_CHAR_VALUE(k), mv = PyUnicode_MAX_CHAR_VALUE(v);
        if (mk > maxchar) maxchar = mk;
        if (mv > maxchar) maxchar = mv;
    }
    int has_inner = PyDict_Contains(props, s_INNER_NUM);
    if (has_inner < 0 || has_inner != inner) { PyErr_Clear(); return NULL; }
    PyObject *out = PyUnicode_New(len, maxchar);
    if (out == NULL) { PyErr_Clear(); return NULL; }
    Py_ssize_t pos = 0;
    i = 0;
    while (PyDict_Next(props, &i, &k, &v)) {
        Py_ssize_t kl = PyUnicode_GET_LENGTH(k), vl = PyUnicode_GET_LENGTH(v);
        if (maxchar <= 0x7F) {
            char *d = (char *)PyUnicode_DATA(out);
            memcpy(d + pos, PyUnicode_DATA(k), (size_t)kl);
            d[pos + kl] = 0x01;
            memcpy(d + pos + kl + 1, PyUnicode_DATA(v), (size_t)vl);
            d[pos + kl + 1 + vl] = 0x02;
        } else if (PyUnicode_CopyCharacters(out, pos, k, 0, kl) < 0 || PyUnicode_WriteChar(out, pos + kl, 0x01) < 0 ||
                   PyUnicode_CopyCharacters(out, pos + kl + 1, v, 0, vl) < 0 ||
                   PyUnicode_WriteChar(out, pos + kl + 1 + vl, 0x02) < 0) {
            Py_DECREF(out);
            PyErr_Clear();
            return NULL;
        }
        pos += kl + vl + 2;
    }
    return out;
}

/* The property ``name`` of the dict is exactly the decimal text of ``value``: 1, else 0 (no error set). */
static int property_is_number(PyObject *props, PyObject *name, int64_t value) {
    PyObject *v = PyDict_GetItemWithError(props, name);
    if (v == NULL || !PyUnicode_CheckExact(v)) { PyErr_Clear(); return 0; }
    PyObject *want = PyUnicode_FromFormat("%lld", (long long)value);
    if (want == NULL) { PyErr_Clear(); return 0; }
    int same = PyUnicode_Compare(v, want) == 0;
    Py_DECREF(want);
    PyErr_Clear();
    return same;
}

/* put_fast of hot_py.py: the whole per-message put in one call, or None (nothing written) when the
 * message or the files need anything but the plain path; with an 18th argument ``inner_num`` > 0, an
 * inner batch's record and its BatchCQ unit. See the Python docstring for the contract. */
static PyObject *hp_put_fast(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_initialised()) return NULL;
    if (nargs != 17 && nargs != 18) {
        PyErr_SetString(PyExc_TypeError, "put_fast(msg, max_message_size, cl_buf, cl_pos, cl_limit, phy, queue_offset, "
                                         "store_ts, cq_buf, cq_pos, idx_buf, hash_slot_num, index_num, index_count, "
                                         "begin_timestamp, begin_phy_offset, hash_slot_count[, inner_num])");
        return NULL;
    }
    int64_t inner_num = 0;
    if (nargs == 18 && as_i64(args[17], &inner_num) < 0) return NULL;
    if (inner_num < 0 || inner_num > INT16_MAX) Py_RETURN_NONE;  /* a BatchCQ unit's batchSize is a short */
    int inner = inner_num > 0;
    int64_t unit_size = inner ? 46 : 20;
    int64_t max_size, cl_pos, cl_limit, phy, qoff, store_ts, cq_pos;
    int64_t slot_num = 0, index_num = 0, n = 0, begin_ts = 0, begin_phy = 0, slot_count = 0;
    int indexed = args[10] != Py_None;
    if (as_i64(args[1], &max_size) < 0 || as_i64(args[3], &cl_pos) < 0 || as_i64(args[4], &cl_limit) < 0 ||
        as_i64(args[5], &phy) < 0 || as_i64(args[6], &qoff) < 0 || as_i64(args[7], &store_ts) < 0 ||
        as_i64(args[9], &cq_pos) < 0) return NULL;
    if (indexed && (as_i64(args[11], &slot_num) < 0 || as_i64(args[12], &index_num) < 0 ||
                    as_i64(args[13], &n) < 0 || as_i64(args[14], &begin_ts) < 0 ||
                    as_i64(args[15], &begin_phy) < 0 || as_i64(args[16], &slot_count) < 0)) return NULL;

    PyObject *f[N_FIELDS] = {NULL};
    PyObject *props_str = NULL, *born_b = NULL, *store_b = NULL, *result = NULL;
    Py_buffer bv = {0}, clv = {0}, cqv = {0}, ixv = {0};
    int have_bv = 0, have_cl = 0, have_cq = 0, have_ix = 0, have_fields = 0;
    int64_t queue_id, flag, sys_flag, reconsume, born_ts, prepared;

    /* -- the message: exactly what the reference accepts in a few checks, else decline */
    if (!read_fields(args[0], f)) goto decline;
    have_fields = 1;
    PyObject *topic = f[F_TOPIC], *body = f[F_BODY], *props = f[F_PROPERTIES];
    if (!text_ok(topic) || PyUnicode_GET_LENGTH(topic) == 0) goto decline;
    int is_schedule = PyUnicode_Compare(topic, s_schedule_topic);
    if (is_schedule == 0 || (is_schedule == -1 && PyErr_Occurred())) goto decline;  /* delay-level tagsCode */
    if (!(PyBytes_CheckExact(body) || PyByteArray_CheckExact(body))) goto decline;
    if (!exact_int_value(f[F_QUEUE_ID], INT32_MIN, INT32_MAX, &queue_id) ||
        !exact_int_value(f[F_FLAG], INT32_MIN, INT32_MAX, &flag) ||
        !exact_int_value(f[F_SYS_FLAG], INT32_MIN, INT32_MAX, &sys_flag) ||
        !exact_int_value(f[F_RECONSUME], INT32_MIN, INT32_MAX, &reconsume) ||
        !exact_int_value(f[F_BORN_TS], INT64_MIN, INT64_MAX, &born_ts) ||
        !exact_int_value(f[F_PREPARED], INT64_MIN, INT64_MAX, &prepared)) goto decline;
    if (sys_flag & TRANSACTION_PREPARED_TYPE) goto decline;  /* PREPARED/ROLLBACK: no queue offset */
    if (f[F_KEEP] != Py_False) goto decline;
    if ((born_b = fast_host(s_born_host, f[F_BORN_HOST])) == NULL ||
        (store_b = fast_host(s_store_host, f[F_STORE_HOST])) == NULL) goto decline;
    if ((props_str = plain_properties(props, inner)) == NULL) goto decline;
    /* an inner batch's record says its queue offsets: INNER_NUM and INNER_BASE as the caller set them */
    if (inner && !(property_is_number(props, s_INNER_NUM, inner_num) &&
                   property_is_number(props, s_INNER_BASE, qoff))) goto decline;
    Py_ssize_t props_len;
    const char *props_utf8 = PyUnicode_AsUTF8AndSize(props_str, &props_len);
    if (props_utf8 == NULL) goto decline;
    Py_ssize_t topic_len;
    const char *topic_utf8 = PyUnicode_AsUTF8AndSize(topic, &topic_len);
    if (topic_utf8 == NULL) goto decline;
    if (PyObject_GetBuffer(body, &bv, PyBUF_SIMPLE) < 0) goto decline;
    have_bv = 1;
    Py_ssize_t body_len = bv.len;
    if (body_len > max_size || props_len > 32767 || topic_len > 32767 || body_len > INT32_MAX) goto decline;
    int v2 = topic_len > 127;
    Py_ssize_t born_len = PyBytes_GET_SIZE(born_b), store_len = PyBytes_GET_SIZE(store_b);
    sys_flag &= ~(int64_t)HOST_FLAGS;
    if (born_len == 20) sys_flag |= BORNHOST_V6_FLAG;
    if (store_len == 20) sys_flag |= STOREHOST_V6_FLAG;
    Py_ssize_t hlen = 72 + born_len + store_len;
    Py_ssize_t total = hlen + body_len + (v2 ? 2 : 1) + topic_len + 2 + props_len;
    if (total > max_size + 65536 || cl_pos < 0 || cl_pos + total > cl_limit) goto decline;

    /* -- TAGS and the index keys, from the dict (it says what the string says: every entry is text) */
    PyObject *tags = PyDict_GetItemWithError(props, s_TAGS);
    PyObject *keys = tags == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(props, s_KEYS);
    PyObject *uniq = keys == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(props, s_UNIQ_KEY);
    if (PyErr_Occurred()) goto decline;
    uint32_t tc = 0;
    if (tags != NULL && java_hash_continue(tags, &tc) < 0) goto decline;
    int32_t hashes[MAX_KEYS];
    int count = 0;
    if (indexed) {
        uint32_t prefix = 0;
        if (java_hash_continue(topic, &prefix) < 0) goto decline;
        prefix = 31u * prefix + '#';
        if (uniq != NULL && PyUnicode_GET_LENGTH(uniq) > 0) {
            if (key_hash_span(prefix, uniq, 0, PyUnicode_GET_LENGTH(uniq), &hashes[count]) < 0) goto decline;
            count++;
        }
        if (keys != NULL) {
            Py_ssize_t len = PyUnicode_GET_LENGTH(keys), start = 0;
            int kind = PyUnicode_KIND(keys);
            const void *data = PyUnicode_DATA(keys);
            for (Py_ssize_t i = 0; i <= len; i++) {
                if (i == len || PyUnicode_READ(kind, data, i) == ' ') {
                    if (i > start) {
                        if (count == MAX_KEYS) goto decline;
                        if (key_hash_span(prefix, keys, start, i, &hashes[count]) < 0) goto decline;
                        count++;
                    }
                    start = i + 1;
                }
            }
        }
        if (slot_num <= 0 || n < 1 || n > index_num || count > index_num - n) goto decline;
    }

    /* -- the files: everything must fit before anything is written */
    if (PyObject_GetBuffer(args[2], &clv, PyBUF_WRITABLE) < 0) goto fail;
    have_cl = 1;
    if (PyObject_GetBuffer(args[8], &cqv, PyBUF_WRITABLE) < 0) goto fail;
    have_cq = 1;
    if (cl_pos + total > clv.len || cq_pos < 0 || cq_pos + unit_size > cqv.len) goto decline;
    int64_t entries_base = INDEX_HEADER_SIZE + slot_num * 4;
    if (indexed) {
        if (PyObject_GetBuffer(args[10], &ixv, PyBUF_WRITABLE) < 0) goto fail;
        have_ix = 1;
        if (entries_base + (n + count) * 20 > ixv.len) goto decline;
    }
    int64_t crc = 0;
    if (inner) {  /* a large body: the compiled CRC (folding when the CPU has it) on the view */
        if (body_len > 0 && body_crc((const char *)bv.buf, body_len, &crc) < 0) goto fail;
    } else if (body_len > 0) {  /* the registered CRC function takes the body object itself (no view to make) */
        PyObject *r = PyObject_CallOneArg(crc32_func, body);
        if (r == NULL) goto fail;
        unsigned long c = PyLong_AsUnsignedLongMask(r);
        Py_DECREF(r);
        if (c == (unsigned long)-1 && PyErr_Occurred()) goto fail;
        crc = (int64_t)(c & 0x7FFFFFFFUL);
    }

    /* -- the record (spec §1), the consume queue unit (§5.1), the index entries (§7) */
    unsigned char *o = (unsigned char *)clv.buf + cl_pos;
    put_i32(o, total); put_i32(o + 4, v2 ? MAGIC_V2 : MAGIC_V1); put_i32(o + 8, crc); put_i32(o + 12, queue_id);
    put_i32(o + 16, flag); put_i64(o + 20, qoff); put_i64(o + 28, phy); put_i32(o + 36, sys_flag);
    put_i64(o + 40, born_ts);
    unsigned char *h = o + 48;
    memcpy(h, PyBytes_AS_STRING(born_b), (size_t)born_len);
    h += born_len;
    put_i64(h, store_ts);
    h += 8;
    memcpy(h, PyBytes_AS_STRING(store_b), (size_t)store_len);
    h += store_len;
    put_i32(h, reconsume); put_i64(h + 4, prepared); put_i32(h + 12, body_len);
    h = o + hlen;
    memcpy(h, bv.buf, (size_t)body_len);
    h += body_len;
    if (v2) { put_i16(h, (int32_t)topic_len); h += 2; } else { *h++ = (unsigned char)topic_len; }
    memcpy(h, topic_utf8, (size_t)topic_len);
    h += topic_len;
    put_i16(h, (int32_t)props_len);
    memcpy(h + 2, props_utf8, (size_t)props_len);

    unsigned char *u = (unsigned char *)cqv.buf + cq_pos;
    put_i64(u, phy); put_i32(u + 8, total); put_i64(u + 12, (int64_t)(int32_t)tc);
    if (inner) {  /* BatchCQ unit (spec §6.1): storeTime, msgBaseOffset, batchSize, compactedOffset -1, reserved 0 */
        put_i64(u + 20, store_ts); put_i64(u + 28, qoff); put_i16(u + 36, (int32_t)inner_num);
        put_i32(u + 38, -1); put_i32(u + 42, 0);
    }

    if (indexed && count > 0) {
        unsigned char *b = (unsigned char *)ixv.buf;
        for (int k = 0; k < count; k++) {
            int32_t kh = hashes[k];
            int64_t spos = INDEX_HEADER_SIZE + (kh % slot_num) * 4;
            int64_t slot_value = get_i32(b + spos);
            if (slot_value <= 0 || slot_value > n) {
                slot_value = 0;
                slot_count++;
            }
            int64_t time_diff = 0;
            if (begin_ts > 0) {
                time_diff = (store_ts - begin_ts) / 1000;
                if (time_diff < 0) time_diff = 0;
                if (time_diff > INT32_MAX_V) time_diff = INT32_MAX_V;
            }
            if (n <= 1) {
                begin_phy = phy;
                begin_ts = store_ts;
            }
            unsigned char *e = b + entries_base + n * 20;
            put_i32(e, kh); put_i64(e + 4, phy); put_i32(e + 12, time_diff); put_i32(e + 16, slot_value);
            put_i32(b + spos, n);
            n++;
        }
        put_i64(b, begin_ts); put_i64(b + 8, store_ts); put_i64(b + 16, begin_phy); put_i64(b + 24, phy);
        put_i32(b + 32, slot_count); put_i32(b + 36, n);
    }
    /* -- (TOTALSIZE, msgId, tagsCode, PROPERTIES, beginTimestamp, beginPhyOffset, hashSlotCount, indexCount) */
    result = PyTuple_New(8);
    if (result == NULL) goto fail;
    PyObject *items[8] = {PyLong_FromSsize_t(total), msg_id_of(PyBytes_AS_STRING(store_b), store_len, phy),
                          PyLong_FromLong((long)(int32_t)tc), Py_NewRef(props_str), PyLong_FromLongLong(begin_ts),
                          PyLong_FromLongLong(begin_phy), PyLong_FromLongLong(slot_count), PyLong_FromLongLong(n)};
    for (int i = 0; i < 8; i++) {
        if (items[i] == NULL) {
            for (int j = i; j < 8; j++) Py_XDECREF(items[j]);
            Py_CLEAR(result);
            goto fail;
        }
        PyTuple_SET_ITEM(result, i, items[i]);
    }
    goto done;
decline:
    PyErr_Clear();
    result = Py_NewRef(Py_None);
    goto done;
fail:
    Py_CLEAR(result);
done:
    if (have_bv) PyBuffer_Release(&bv);
    if (have_cl) PyBuffer_Release(&clv);
    if (have_cq) PyBuffer_Release(&cqv);
    if (have_ix) PyBuffer_Release(&ixv);
    if (have_fields) for (int i = 0; i < N_FIELDS; i++) Py_XDECREF(f[i]);
    Py_XDECREF(props_str); Py_XDECREF(born_b); Py_XDECREF(store_b);
    return result;
}

/* ------------------------------------------------------------------ init */


/* ------------------------------------------------------------------ range dispatch (rebuild job) */

#define CQ_REC_SIZE 46   /* spark/scan.py CQ_REC ">qqqiqqh" */
#define IDX_REC_SIZE 20  /* spark/scan.py IDX_REC ">iqq" */
#define TOPIC_CACHE 16

/* get_property for ASCII properties: 1 found (value at *v, *vlen), 0 absent, -1 undecided here (the
 * last occurrence has an empty value: an earlier one may count, which the Python rule decides). */
static int simple_property(const unsigned char *t, Py_ssize_t n, const char *key, Py_ssize_t klen,
                           const unsigned char **v, Py_ssize_t *vlen) {
    Py_ssize_t found = -1, start = -1;
    for (Py_ssize_t i = n - klen - 2; i >= 0; i--) {
        if (t[i] == 0x02 && t[i + klen + 1] == 0x01 && memcmp(t + i + 1, key, (size_t)klen) == 0) { found = i; break; }
    }
    if (found >= 0) start = found + klen + 2;
    else if (n >= klen + 1 && memcmp(t, key, (size_t)klen) == 0 && t[klen] == 0x01) start = klen + 1;
    else return 0;
    const unsigned char *e = memchr(t + start, 0x02, (size_t)(n - start));
    Py_ssize_t len = (e == NULL ? n : (Py_ssize_t)(e - t)) - start;
    if (len == 0 && found > 0) return -1;
    if (len == 0) return 0;
    *v = t + start;
    *vlen = len;
    return 1;
}

static int all_ascii(const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) if (p[i] & 0x80) return 0;
    return 1;
}

static int append_bytes(PyObject *ba, const unsigned char *src, Py_ssize_t n) {
    Py_ssize_t old = PyByteArray_GET_SIZE(ba);
    if (PyByteArray_Resize(ba, old + n) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(ba) + old, src, (size_t)n);
    return 0;
}

/* dispatch_range(buf, pos, stop, limit, check_crc, want_index, cq, index) -> (pos, records).
 * The rebuild's per-record dispatch for plain records, in one call: see hot_py.dispatch_range. */
static PyObject *hp_dispatch_range(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_initialised()) return NULL;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "dispatch_range(buf, pos, stop, limit, check_crc, want_index, cq, index)");
        return NULL;
    }
    int64_t pos, stop, limit;
    if (as_i64(args[1], &pos) < 0 || as_i64(args[2], &stop) < 0 || as_i64(args[3], &limit) < 0) return NULL;
    int check_crc = PyObject_IsTrue(args[4]), want_index = PyObject_IsTrue(args[5]);
    if (check_crc < 0 || want_index < 0) return NULL;
    PyObject *cq = args[6], *index = args[7];
    if (!PyDict_Check(cq) || !PyByteArray_Check(index)) {
        PyErr_SetString(PyExc_TypeError, "dispatch_range: cq must be a dict and index a bytearray");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    int64_t n = view.len;
    PyObject *topics[TOPIC_CACHE] = {NULL};
    int64_t topic_at[TOPIC_CACHE];
    int32_t topic_len_of[TOPIC_CACHE];
    int n_topics = 0;
    int64_t records = 0;
    int failed = 0;
    while (pos < stop) {
        ScanRecord r;
        if (!scan_record(b, n, pos, limit, &r)) break;
        const unsigned char *h = b + pos;
        const unsigned char *topic_raw = b + r.topic_pos, *props = b + r.props_pos;
        if ((r.sys_flag & INNER_BATCH_FLAG) || !all_ascii(topic_raw, r.topic_len) || !all_ascii(props, r.props_len)) break;
        if (r.topic_len == 19 && memcmp(topic_raw, "SCHEDULE_TOPIC_XXXX", 19) == 0) break;
        if (find_bytes(props, r.props_len, "INNER_NUM\x01", 10) != NULL) break;
        const unsigned char *tags = NULL, *keys = NULL, *uniq = NULL;
        Py_ssize_t tags_len = 0, keys_len = 0, uniq_len = 0;
        int has_tags = simple_property(props, r.props_len, "TAGS", 4, &tags, &tags_len);
        int has_keys = simple_property(props, r.props_len, "KEYS", 4, &keys, &keys_len);
        int has_uniq = simple_property(props, r.props_len, "UNIQ_KEY", 8, &uniq, &uniq_len);
        if (has_tags < 0 || has_keys < 0 || has_uniq < 0) break;
        if (check_crc && r.body_len > 0) {
            int64_t crc;
            int64_t body_pos = pos + r.hsize;
            if (body_crc((const char *)b + body_pos, r.body_len, &crc) < 0) { failed = 1; break; }
            if (crc != get_i32(h + 8)) break;
        }
        int32_t queue_id = get_i32(h + 12);
        int64_t queue_offset = get_i64(h + 20), phy = get_i64(h + 28);
        int tran = r.sys_flag & 0xC;
        if (tran == 0x0 || tran == 0x8) {
            PyObject *topic = NULL;
            for (int i = 0; i < n_topics; i++) {
                if (topic_len_of[i] == r.topic_len && memcmp(b + topic_at[i], topic_raw, (size_t)r.topic_len) == 0) {
                    topic = topics[i];
                    break;
                }
            }
            if (topic == NULL) {
                topic = PyUnicode_DecodeASCII((const char *)topic_raw, r.topic_len, "strict");
                if (topic == NULL) { failed = 1; break; }
                if (n_topics < TOPIC_CACHE) {
                    topics[n_topics] = topic;
                    topic_at[n_topics] = r.topic_pos;
                    topic_len_of[n_topics] = r.topic_len;
                    n_topics++;
                } else {
                    Py_DECREF(topics[TOPIC_CACHE - 1]);
                    topics[TOPIC_CACHE - 1] = topic;
                    topic_at[TOPIC_CACHE - 1] = r.topic_pos;
                    topic_len_of[TOPIC_CACHE - 1] = r.topic_len;
                }
            }
            PyObject *qkey = Py_BuildValue("(Oi)", topic, queue_id);
            if (qkey == NULL) { failed = 1; break; }
            PyObject *blob = PyDict_GetItemWithError(cq, qkey);
            if (blob == NULL) {
                if (PyErr_Occurred() || (blob = PyByteArray_FromStringAndSize(NULL, 0)) == NULL
                    || PyDict_SetItem(cq, qkey, blob) < 0) {
                    Py_XDECREF(blob);
                    Py_DECREF(qkey);
                    failed = 1;
                    break;
                }
                Py_DECREF(blob);  /* the dict holds it */
            }
            Py_DECREF(qkey);
            uint32_t th = 0;
            for (Py_ssize_t i = 0; i < tags_len; i++) th = 31u * th + tags[i];
            unsigned char unit[CQ_REC_SIZE];
            put_i64(unit, queue_offset);
            put_i64(unit + 8, queue_offset);
            put_i64(unit + 16, phy);
            put_i32(unit + 24, r.total);
            put_i64(unit + 28, has_tags ? (int64_t)(int32_t)th : 0);
            put_i64(unit + 36, r.store_ts);
            put_i16(unit + 44, 1);
            if (append_bytes(blob, unit, CQ_REC_SIZE) < 0) { failed = 1; break; }
        }
        if (want_index && tran != 0xC) {
            uint32_t prefix = 0;
            for (int32_t i = 0; i < r.topic_len; i++) prefix = 31u * prefix + topic_raw[i];
            prefix = 31u * prefix + '#';
            unsigned char rec[IDX_REC_SIZE];
            put_i64(rec + 4, phy);
            put_i64(rec + 12, r.store_ts);
            if (has_uniq) {
                uint32_t kh = prefix;
                for (Py_ssize_t i = 0; i < uniq_len; i++) kh = 31u * kh + uniq[i];
                put_i32(rec, key_hash_of(kh));
                if (append_bytes(index, rec, IDX_REC_SIZE) < 0) { failed = 1; break; }
            }
            if (has_keys) {
                Py_ssize_t i = 0;
                while (i < keys_len) {
                    while (i < keys_len && keys[i] == ' ') i++;
                    if (i >= keys_len) break;
                    uint32_t kh = prefix;
                    while (i < keys_len && keys[i] != ' ') kh = 31u * kh + keys[i++];
                    put_i32(rec, key_hash_of(kh));
                    if (append_bytes(index, rec, IDX_REC_SIZE) < 0) { failed = 1; break; }
                }
                if (failed) break;
            }
        }
        pos += r.total;
        records++;
    }
    for (int i = 0; i < n_topics; i++) Py_DECREF(topics[i]);
    PyBuffer_Release(&view);
    if (failed) return NULL;
    return Py_BuildValue("(LL)", (long long)pos, (long long)records);
}


/* link_index_entries(keys, hash_slot_num, prev_phy, prev_ts) -> (slots, entries, header): see hot_py. */
#define LINK_BUCKET_SLOTS 16384
static PyObject *hp_link_index_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "link_index_entries(keys, hash_slot_num, prev_phy, prev_ts)");
        return NULL;
    }
    int64_t slot_num, prev_phy, prev_ts;
    if (as_i64(args[1], &slot_num) < 0 || as_i64(args[2], &prev_phy) < 0 || as_i64(args[3], &prev_ts) < 0) return NULL;
    if (slot_num <= 0 || slot_num > INT32_MAX) { PyErr_SetString(PyExc_ValueError, "hash_slot_num must be positive"); return NULL; }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t n_keys = view.len / IDX_REC_SIZE;
    PyObject *result = NULL;
    if (view.len % IDX_REC_SIZE != 0) {
        PyErr_SetString(struct_error, "keys must be a whole number of (keyHash, phyOffset, storeTimestamp) records");
        goto out;
    }
    if (n_keys >= INT32_MAX) { PyErr_SetString(PyExc_ValueError, "too many keys"); goto out; }
    PyObject *slots = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 * slot_num));
    PyObject *entries = PyBytes_FromStringAndSize(NULL, n_keys * 20);
    if (slots == NULL || entries == NULL) { Py_XDECREF(slots); Py_XDECREF(entries); goto out; }
    /* Slot chains are linked bucket by bucket of LINK_BUCKET_SLOTS consecutive slots (keys of a bucket in
     * commitlog order), so the slot table being updated stays in cache: linking in plain key order
     * misses the cache (and the TLB) on almost every key of a 20 MB table, ~300 ns a key on this
     * machine. The result is the same: an entry's prev is the last earlier key of its slot. */
    int64_t n_buckets = (slot_num + LINK_BUCKET_SLOTS - 1) / LINK_BUCKET_SLOTS;
    int32_t *slot_of = PyMem_Calloc((size_t)slot_num, sizeof(int32_t));
    Py_ssize_t *bucket_at = PyMem_Calloc((size_t)n_buckets + 1, sizeof(Py_ssize_t));
    int32_t *prev_of = PyMem_Malloc((size_t)(n_keys ? n_keys : 1) * sizeof(int32_t));
    int32_t (*order)[2] = PyMem_Malloc((size_t)(n_keys ? n_keys : 1) * sizeof(*order));
    if (slot_of == NULL || bucket_at == NULL || prev_of == NULL || order == NULL) {
        PyMem_Free(slot_of); PyMem_Free(bucket_at); PyMem_Free(prev_of); PyMem_Free(order);
        Py_DECREF(slots); Py_DECREF(entries); PyErr_NoMemory(); goto out;
    }
    const unsigned char *k = (const unsigned char *)view.buf;
    for (Py_ssize_t i = 0; i < n_keys; i++, k += IDX_REC_SIZE) {
        int64_t s = (int64_t)get_i32(k) % slot_num;
        if (s < 0) s += slot_num;
        bucket_at[s / LINK_BUCKET_SLOTS + 1]++;
    }
    for (int64_t b = 0; b < n_buckets; b++) bucket_at[b + 1] += bucket_at[b];
    k = (const unsigned char *)view.buf;
    for (Py_ssize_t i = 0; i < n_keys; i++, k += IDX_REC_SIZE) {
        int64_t s = (int64_t)get_i32(k) % slot_num;
        if (s < 0) s += slot_num;
        Py_ssize_t at = bucket_at[s / LINK_BUCKET_SLOTS]++;
        order[at][0] = (int32_t)i;
        order[at][1] = (int32_t)s;
    }
    int64_t slot_count = 0;
    for (Py_ssize_t j = 0; j < n_keys; j++) {
        int32_t i = order[j][0], s = order[j][1];
        int32_t prev = slot_of[s];
        if (prev == 0) slot_count++;
        prev_of[i] = prev;
        slot_of[s] = i + 1;
    }
    PyMem_Free(order);
    PyMem_Free(bucket_at);
    k = (const unsigned char *)view.buf;
    unsigned char *e = (unsigned char *)PyBytes_AS_STRING(entries);
    int64_t begin_ts = prev_ts > 0 ? prev_ts : 0, begin_phy = prev_phy > 0 ? prev_phy : 0;
    int64_t end_ts = begin_ts, end_phy = begin_phy;
    for (Py_ssize_t i = 0; i < n_keys; i++, k += IDX_REC_SIZE, e += 20) {
        int64_t phy = get_i64(k + 4), ts = get_i64(k + 12);
        int64_t diff = 0;
        if (begin_ts > 0) {
            int64_t d = ts - begin_ts;
            diff = d < 0 ? 0 : d / 1000;
            if (diff > INT32_MAX) diff = INT32_MAX;
        }
        memcpy(e, k, 12);  /* keyHash(4) phyOffset(8), big-endian as in the key */
        put_i32(e + 12, diff);
        put_i32(e + 16, prev_of[i]);
        if (i == 0) { begin_ts = ts; begin_phy = phy; }
        end_ts = ts;
        end_phy = phy;
    }
    PyMem_Free(prev_of);
    unsigned char *sb = (unsigned char *)PyBytes_AS_STRING(slots);
    for (int64_t i = 0; i < slot_num; i++) put_i32(sb + 4 * i, slot_of[i]);
    PyMem_Free(slot_of);
    result = Py_BuildValue("(NN(LLLLLL))", slots, entries, (long long)begin_ts, (long long)end_ts, (long long)begin_phy,
                           (long long)end_phy, (long long)slot_count, (long long)(n_keys + 1));
out:
    PyBuffer_Release(&view);
    return result;
}


/* cq_units_of(recs, granularity_ms) -> (units, contiguous, table): see hot_py.cq_units_of. */
static PyObject *hp_cq_units_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "cq_units_of(recs, granularity_ms)"); return NULL; }
    int64_t gran;
    if (as_i64(args[1], &gran) < 0) return NULL;
    if (gran <= 0) { PyErr_SetString(PyExc_ValueError, "granularity_ms must be positive"); return NULL; }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL, *units = NULL, *table = NULL, *seen = NULL;
    if (view.len % CQ_REC_SIZE != 0) {
        PyErr_SetString(struct_error, "recs must be a whole number of CQ_REC records");
        goto out;
    }
    Py_ssize_t n = view.len / CQ_REC_SIZE;
    if ((units = PyBytes_FromStringAndSize(NULL, n * 20)) == NULL || (table = PyList_New(0)) == NULL
        || (seen = PySet_New(NULL)) == NULL) goto out;
    const unsigned char *r = (const unsigned char *)view.buf;
    unsigned char *u = (unsigned char *)PyBytes_AS_STRING(units);
    int contiguous = 1, have_last = 0;
    int64_t prev_off = 0, prev_end = 0, last_bucket = 0;
    for (Py_ssize_t i = 0; i < n; i++, r += CQ_REC_SIZE, u += 20) {
        int64_t off = get_i64(r), phy = get_i64(r + 16), ts = get_i64(r + 36);
        int32_t size = get_i32(r + 24);
        memcpy(u, r + 16, 20);  /* phy(8) size(4) tagsCode(8): the CQ unit, big-endian as stored */
        if (i > 0 && (off != prev_off + 1 || phy + size <= prev_end)) contiguous = 0;
        prev_off = off;
        prev_end = phy + size;
        int64_t m = ts % gran;
        if (m < 0) m += gran;
        int64_t bucket = ts - m;
        if (!have_last || bucket != last_bucket) {
            have_last = 1;
            last_bucket = bucket;
            PyObject *b = PyLong_FromLongLong(bucket);
            if (b == NULL) goto out;
            int present = PySet_Contains(seen, b);
            if (present < 0 || (!present && PySet_Add(seen, b) < 0)) { Py_DECREF(b); goto out; }
            if (!present) {
                PyObject *pair = Py_BuildValue("(NL)", b, (long long)off);
                if (pair == NULL) goto out;
                int rc = PyList_Append(table, pair);
                Py_DECREF(pair);
                if (rc < 0) goto out;
            } else {
                Py_DECREF(b);
            }
        }
    }
    result = Py_BuildValue("(OOO)", units, contiguous ? Py_True : Py_False, table);
out:
    Py_XDECREF(units);
    Py_XDECREF(table);
    Py_XDECREF(seen);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ write buffer (store/buffered_put.py) */

/* inner_batch_known of hot_py.py: (TAGS, KEYS or None, UNIQ_KEY or None) from an exact dict when it says
 * what the properties string says and the topic has no delay-level tagsCode, else None. New reference. */
static PyObject *inner_batch_known(PyObject *topic, PyObject *props, PyObject *text) {
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    if (utf8 == NULL) return NULL;
    return known_from_dict(topic, props, utf8, len);
}

static PyObject *hp_inner_batch_known(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[1]) || !PyUnicode_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "inner_batch_known(topic: str, properties: dict, props: str)");
        return NULL;
    }
    return inner_batch_known(args[0], args[1], args[2]);
}

/* A property back as it was (old NULL: absent) after buffer_inner_batch set it; keeps any error set. */
static void put_back(PyObject *props, PyObject *name, PyObject *old) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (old != NULL) {
        if (PyDict_SetItem(props, name, old) < 0) PyErr_Clear();
    } else if (PyDict_DelItem(props, name) < 0) {
        PyErr_Clear();
    }
    PyErr_Restore(et, ev, tb);
}

/* buffer_inner_batch of hot_py.py: INNER_BASE/INNER_NUM set, check_message + prepare_record +
 * record_parts composed in one call (the same functions, so the same verdicts and bytes), the parts and
 * the dispatch entry appended to the caller's lists; the properties put back on a decline or error. */
static PyObject *hp_buffer_inner_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_initialised()) return NULL;
    if (nargs != 11 || !PyList_CheckExact(args[9]) || !PyList_CheckExact(args[10])) {
        PyErr_SetString(PyExc_TypeError, "buffer_inner_batch(msg, max_message_size, phy, queue_offset, store_ts, "
                                         "inner_num, room, small_room, small_size, parts: list, records: list)");
        return NULL;
    }
    PyObject *msg = args[0];
    int64_t phy, room, small_room, small_size;
    if (as_i64(args[2], &phy) < 0 || as_i64(args[6], &room) < 0 || as_i64(args[7], &small_room) < 0 ||
        as_i64(args[8], &small_size) < 0) return NULL;
    PyObject *properties = msg_attr(msg, s_properties);
    if (properties == NULL) return NULL;
    if (!PyDict_CheckExact(properties)) { Py_DECREF(properties); Py_RETURN_NONE; }
    PyObject *old_base = NULL, *old_num = NULL, *base_text = NULL, *num_text = NULL;
    PyObject *rec = NULL, *parts = NULL, *topic = NULL, *known = NULL, *body = NULL, *msg_id = NULL;
    PyObject *entry = NULL, *queue_id = NULL, *prepared = NULL, *result = NULL;
    int set = 0, declined = 0;
    old_base = Py_XNewRef(PyDict_GetItemWithError(properties, s_INNER_BASE));
    if (old_base == NULL && PyErr_Occurred()) goto done;
    old_num = Py_XNewRef(PyDict_GetItemWithError(properties, s_INNER_NUM));
    if (old_num == NULL && PyErr_Occurred()) goto done;
    if ((base_text = PyObject_Str(args[3])) == NULL || (num_text = PyObject_Str(args[5])) == NULL) goto done;
    set = 1;
    if (PyDict_SetItem(properties, s_INNER_BASE, base_text) < 0 || PyDict_SetItem(properties, s_INNER_NUM, num_text) < 0)
        goto done;
    PyObject *r = hp_check_message(self, args, 1);
    if (r == NULL) goto refused;
    Py_DECREF(r);
    PyObject *prep_args[3] = {msg, Py_None, args[1]};
    if ((rec = hp_prepare_record(self, prep_args, 3, NULL)) == NULL) goto refused;
    Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(rec, 0));
    if (size == -1 && PyErr_Occurred()) goto done;
    if (size > room || (size < small_size && size > small_room)) { declined = 1; goto done; }
    PyObject *parts_args[5] = {rec, msg, args[3], args[2], args[4]};
    if ((parts = hp_record_parts(self, parts_args, 5)) == NULL) goto refused;
    if ((topic = msg_attr(msg, s_topic)) == NULL) goto done;
    PyObject *text = PyTuple_GET_ITEM(rec, 7), *store_raw = PyTuple_GET_ITEM(rec, 5);
    if ((known = inner_batch_known(topic, properties, text)) == NULL) goto done;
    if ((msg_id = msg_id_of(PyBytes_AS_STRING(store_raw), PyBytes_GET_SIZE(store_raw), phy)) == NULL) goto done;
    body = PyTuple_GET_ITEM(parts, 1);
    body = PyBytes_CheckExact(body) ? Py_NewRef(body) : PyBytes_FromObject(body);
    if (body == NULL) goto done;
    if ((queue_id = msg_attr(msg, s_queue_id)) == NULL ||
        (prepared = msg_attr(msg, s_prepared_transaction_offset)) == NULL) goto done;
    entry = PyTuple_Pack(10, args[2], PyTuple_GET_ITEM(rec, 0), topic, queue_id, args[3], PyTuple_GET_ITEM(rec, 3),
                         args[4], prepared, text, known);
    if (entry == NULL) goto done;
    result = PyTuple_Pack(2, PyTuple_GET_ITEM(rec, 0), msg_id);
    if (result == NULL) goto done;
    /* the lists last, all or nothing: the three parts, then the entry */
    Py_ssize_t n0 = PyList_GET_SIZE(args[9]);
    if (PyList_Append(args[9], PyTuple_GET_ITEM(parts, 0)) < 0 || PyList_Append(args[9], body) < 0 ||
        PyList_Append(args[9], PyTuple_GET_ITEM(parts, 2)) < 0 || PyList_Append(args[10], entry) < 0) {
        PyList_SetSlice(args[9], n0, PyList_GET_SIZE(args[9]), NULL);
        Py_CLEAR(result);
    }
    goto done;
refused:  /* a RecordError is the verdict "decline"; anything else propagates */
    if (PyErr_ExceptionMatches(RecordError)) { PyErr_Clear(); declined = 1; }
done:
    if (result == NULL && set) {
        put_back(properties, s_INNER_BASE, old_base);
        put_back(properties, s_INNER_NUM, old_num);
    }
    if (declined && !PyErr_Occurred()) result = Py_NewRef(Py_None);
    Py_DECREF(properties);
    Py_XDECREF(old_base); Py_XDECREF(old_num); Py_XDECREF(base_text); Py_XDECREF(num_text);
    Py_XDECREF(rec); Py_XDECREF(parts); Py_XDECREF(topic); Py_XDECREF(known); Py_XDECREF(body); Py_XDECREF(msg_id);
    Py_XDECREF(entry); Py_XDECREF(queue_id); Py_XDECREF(prepared);
    return result;
}

/* dispatch_inner_batch of hot_py.py: put_bcq_unit with the tagsCode of TAGS, then index_put_keys, in one
 * call; the index arguments are checked before the unit is written. */
static PyObject *hp_dispatch_inner_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_initialised()) return NULL;
    if (nargs != 18) {
        PyErr_SetString(PyExc_TypeError, "dispatch_inner_batch(cq_buf, cq_pos, phy, size, tags, store_ts, base, "
                                         "batch_size, idx_buf, hash_slot_num, index_num, index_count, "
                                         "begin_timestamp, begin_phy_offset, hash_slot_count, topic, uniq_key, keys)");
        return NULL;
    }
    int indexed = args[8] != Py_None;
    if (indexed) {
        int64_t index_num, n;
        if (as_i64(args[10], &index_num) < 0 || as_i64(args[11], &n) < 0) return NULL;
        if (n < 1 || n > index_num) {
            PyErr_SetString(PyExc_ValueError, "index_count must be between 1 and index_num");
            return NULL;
        }
    }
    PyObject *tc = hp_tags_code(self, args[4]);
    if (tc == NULL) return NULL;
    PyObject *unit_args[8] = {args[0], args[1], args[2], args[3], tc, args[5], args[6], args[7]};
    PyObject *r = hp_put_bcq_unit(self, unit_args, 8);
    if (r == NULL) { Py_DECREF(tc); return NULL; }
    Py_DECREF(r);
    if (!indexed) {
        PyObject *zero = PyLong_FromLong(0);
        PyObject *out = zero == NULL ? NULL : PyTuple_Pack(7, tc, zero, zero, args[12], args[13], args[14], args[11]);
        Py_XDECREF(zero);
        Py_DECREF(tc);
        return out;
    }
    PyObject *idx_args[12] = {args[8], args[9], args[10], args[11], args[12], args[13], args[14], args[15], args[16],
                              args[17], args[2], args[5]};
    PyObject *keys = hp_index_put_keys(self, idx_args, 12);
    if (keys == NULL) { Py_DECREF(tc); return NULL; }
    PyObject *out = PyTuple_New(1 + PyTuple_GET_SIZE(keys));
    if (out != NULL) {
        PyTuple_SET_ITEM(out, 0, tc);
        tc = NULL;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); i++) PyTuple_SET_ITEM(out, i + 1, Py_NewRef(PyTuple_GET_ITEM(keys, i)));
    }
    Py_XDECREF(tc);
    Py_DECREF(keys);
    return out;
}

/* dispatch_inner_batches of hot_py.py: the committed inner batches at the head of `appended`, one
 * hp_dispatch_inner_batch each, their queues and the index state moved on, their entries popped; it
 * stops at the first record the flat dispatch does not take (the same tests as the twin, in order). */
static PyObject *s_popleft, *s_is_batch, *s_max_offset, *s_max_physic_offset, *s_file_queue, *s_files, *s_mv,
    *s_wrote_position, *s_file_size;

/* Attribute `name` of obj as int64 (a new reference is not kept); -1 with an error set on failure. */
static int attr_i64(PyObject *obj, PyObject *name, int64_t *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    int rc = as_i64(v, out);
    Py_DECREF(v);
    return rc;
}

static int set_attr_i64(PyObject *obj, PyObject *name, int64_t value) {
    PyObject *v = PyLong_FromLongLong((long long)value);
    if (v == NULL) return -1;
    int rc = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return rc;
}

static int popleft(PyObject *deque) {
    PyObject *r = PyObject_CallMethodNoArgs(deque, s_popleft);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

#define BCQ_UNIT 46
#define TRANSACTION_PREPARED_TYPE 0x4

static PyObject *hp_dispatch_inner_batches(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_initialised()) return NULL;
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "dispatch_inner_batches(appended, sizes, cqs, offset, idx_buf, hash_slot_num, "
                                         "index_num, index_count, begin_timestamp, begin_phy_offset, hash_slot_count, "
                                         "end_phy_offset, end_timestamp, room_needed, arrivals)");
        return NULL;
    }
    PyObject *appended = args[0], *sizes = args[1], *cqs = args[2], *idx_buf = args[4], *arrivals = args[14];
    int indexed = idx_buf != Py_None;
    int64_t offset, index_num, n, begin_ts, begin_phy, slot_count, end_phy, end_ts, room_needed;
    if (as_i64(args[3], &offset) < 0 || as_i64(args[6], &index_num) < 0 || as_i64(args[7], &n) < 0 ||
        as_i64(args[8], &begin_ts) < 0 || as_i64(args[9], &begin_phy) < 0 || as_i64(args[10], &slot_count) < 0 ||
        as_i64(args[11], &end_phy) < 0 || as_i64(args[12], &end_ts) < 0 || as_i64(args[13], &room_needed) < 0)
        return NULL;
    if (!PyDict_Check(cqs) || (arrivals != Py_None && !PyList_Check(arrivals))) {
        PyErr_SetString(PyExc_TypeError, "dispatch_inner_batches: cqs must be a dict, arrivals a list or None");
        return NULL;
    }
    if (indexed && (n < 1 || n > index_num)) {
        PyErr_SetString(PyExc_ValueError, "index_count must be between 1 and index_num");
        return NULL;
    }
    int64_t hash_slot_num = 0;
    Py_buffer idx_view = {0};
    if (indexed) {
        if (as_i64(args[5], &hash_slot_num) < 0) return NULL;
        if (PyObject_GetBuffer(idx_buf, &idx_view, PyBUF_WRITABLE) < 0) return NULL;
    }
    long count = 0;
    PyObject *last_ts = Py_NewRef(Py_None), *partial = Py_NewRef(Py_None);
    PyObject *entry = NULL, *head = NULL, *cq = NULL, *files = NULL, *cq_mf = NULL, *mv = NULL, *res = NULL;
    PyObject *fq = NULL, *is_batch = NULL;
    for (;;) {
        Py_CLEAR(entry); Py_CLEAR(head); Py_CLEAR(cq); Py_CLEAR(files); Py_CLEAR(cq_mf); Py_CLEAR(mv); Py_CLEAR(res);
        Py_CLEAR(fq); Py_CLEAR(is_batch);
        Py_ssize_t len = PyObject_Length(appended);
        if (len < 0) goto error;
        if (len == 0) break;
        if ((entry = PySequence_GetItem(appended, 0)) == NULL) goto error;
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 10) {
            PyErr_SetString(PyExc_ValueError, "a dispatch entry must be a 10-tuple");
            goto error;
        }
        PyObject *const *f = &PyTuple_GET_ITEM(entry, 0);
        int64_t phy, size, base, sys_flag;
        if (as_i64(f[0], &phy) < 0 || as_i64(f[5], &sys_flag) < 0) goto error;
        PyObject *known = f[9];
        if (phy != offset || known == Py_None || !(sys_flag & INNER_BATCH_FLAG) || (sys_flag & TRANSACTION_PREPARED_TYPE))
            break;
        if (as_i64(f[1], &size) < 0 || as_i64(f[4], &base) < 0) goto error;
        int64_t s_phy = 0, s_base = 0, num = 0;
        for (;;) {  /* stale batch sizes (records dispatch moved past) off, then this record's */
            Py_CLEAR(head);
            Py_ssize_t slen = PyObject_Length(sizes);
            if (slen < 0) goto error;
            if (slen == 0) break;
            if ((head = PySequence_GetItem(sizes, 0)) == NULL) goto error;
            if (!PyTuple_Check(head) || PyTuple_GET_SIZE(head) != 3) {
                PyErr_SetString(PyExc_ValueError, "a batch size entry must be a 3-tuple");
                goto error;
            }
            if (as_i64(PyTuple_GET_ITEM(head, 0), &s_phy) < 0) goto error;
            if (s_phy >= phy) break;
            if (popleft(sizes) < 0) goto error;
        }
        if (head == NULL || s_phy != phy) break;
        if (as_i64(PyTuple_GET_ITEM(head, 1), &s_base) < 0) goto error;
        if (s_base != base) break;
        if (as_i64(PyTuple_GET_ITEM(head, 2), &num) < 0) goto error;
        PyObject *key = PyTuple_Pack(2, f[2], f[3]);
        if (key == NULL) goto error;
        cq = Py_XNewRef(PyDict_GetItemWithError(cqs, key));
        Py_DECREF(key);
        if (cq == NULL) {
            if (PyErr_Occurred()) goto error;
            break;
        }
        /* the queue continues exactly here (its first unit sets minOffset: the general path) */
        if ((is_batch = PyObject_GetAttr(cq, s_is_batch)) == NULL) goto error;
        int ib = PyObject_IsTrue(is_batch);
        if (ib < 0) goto error;
        if (!ib) break;
        int64_t cq_max, cq_max_phy, cq_pos, cq_file_size;
        if (attr_i64(cq, s_max_offset, &cq_max) < 0) goto error;
        if (cq_max != base || base == 0) break;
        if (attr_i64(cq, s_max_physic_offset, &cq_max_phy) < 0) goto error;
        if (phy <= cq_max_phy) break;
        if ((fq = PyObject_GetAttr(cq, s_file_queue)) == NULL || (files = PyObject_GetAttr(fq, s_files)) == NULL)
            goto error;
        Py_ssize_t nfiles = PyObject_Length(files);
        if (nfiles < 0) goto error;
        if (nfiles == 0) break;
        if ((cq_mf = PySequence_GetItem(files, nfiles - 1)) == NULL) goto error;
        if (attr_i64(cq_mf, s_wrote_position, &cq_pos) < 0 || attr_i64(cq_mf, s_file_size, &cq_file_size) < 0)
            goto error;
        if (cq_pos + BCQ_UNIT > cq_file_size) break;
        if (!PyTuple_Check(known) || PyTuple_GET_SIZE(known) != 3) {
            PyErr_SetString(PyExc_ValueError, "known properties must be a 3-tuple");
            goto error;
        }
        /* a file the keys go into without a roll, and a record not indexed yet */
        if (indexed && (index_num - n < room_needed || phy <= end_phy)) break;
        if ((mv = PyObject_GetAttr(cq_mf, s_mv)) == NULL) goto error;
        /* dispatch_inner_batch without boxing: the tagsCode, the unit (put_bcq_unit's checks), the keys */
        if ((res = hp_tags_code(self, PyTuple_GET_ITEM(known, 0))) == NULL) goto error;  /* res: the tagsCode */
        int64_t tc, size32, num16, store_ts;
        if (as_i64(res, &tc) < 0 || as_i32(f[1], &size32) < 0 || as_i64(f[6], &store_ts) < 0 ||
            as_i16(PyTuple_GET_ITEM(head, 2), &num16) < 0) goto error;
        Py_buffer unit_view;
        if (PyObject_GetBuffer(mv, &unit_view, PyBUF_WRITABLE) < 0) goto error;
        if (cq_pos < 0 || cq_pos > unit_view.len || cq_pos + BCQ_UNIT > unit_view.len) {
            PyErr_Format(struct_error, "pack_into requires a buffer of at least %lld bytes", (long long)(cq_pos + BCQ_UNIT));
            PyBuffer_Release(&unit_view);
            goto error;
        }
        unsigned char *u = (unsigned char *)unit_view.buf + cq_pos;
        put_i64(u, phy); put_i32(u + 8, size32); put_i64(u + 12, tc); put_i64(u + 20, store_ts);
        put_i64(u + 28, base); put_i16(u + 36, (int32_t)num16); put_i32(u + 38, -1); put_i32(u + 42, 0);
        PyBuffer_Release(&unit_view);
        int64_t written = 0, key_count = 0;
        if (indexed) {
            int w = 0, kc = 0;
            int64_t n2 = n, bts2 = begin_ts, bphy2 = begin_phy, sc2 = slot_count;
            int rc = index_put_keys_into((unsigned char *)idx_view.buf, idx_view.len, hash_slot_num, index_num, &n2,
                                         &bts2, &bphy2, &sc2, f[2], PyTuple_GET_ITEM(known, 2),
                                         PyTuple_GET_ITEM(known, 1), phy, store_ts, 0, &w, &kc);
            if (rc < 0) goto error;
            if (rc > 0) {  /* the Python reference for these keys (hp_index_put_keys's fallback) */
                PyObject *vals[6] = {PyLong_FromLongLong(hash_slot_num), PyLong_FromLongLong(index_num),
                                     PyLong_FromLongLong(n), PyLong_FromLongLong(begin_ts),
                                     PyLong_FromLongLong(begin_phy), PyLong_FromLongLong(slot_count)};
                PyObject *r = NULL;
                if (vals[0] && vals[1] && vals[2] && vals[3] && vals[4] && vals[5]) {
                    PyObject *call[12] = {idx_buf, vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], f[2],
                                          PyTuple_GET_ITEM(known, 2), PyTuple_GET_ITEM(known, 1), f[0], f[6]};
                    r = hp_index_put_keys(self, call, 12);
                }
                for (int i = 0; i < 6; i++) Py_XDECREF(vals[i]);
                if (r == NULL) goto error;
                int bad = !PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 6 ||
                          as_i64(PyTuple_GET_ITEM(r, 0), &written) < 0 || as_i64(PyTuple_GET_ITEM(r, 1), &key_count) < 0 ||
                          as_i64(PyTuple_GET_ITEM(r, 2), &bts2) < 0 || as_i64(PyTuple_GET_ITEM(r, 3), &bphy2) < 0 ||
                          as_i64(PyTuple_GET_ITEM(r, 4), &sc2) < 0 || as_i64(PyTuple_GET_ITEM(r, 5), &n2) < 0;
                Py_DECREF(r);
                if (bad) {
                    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "index_put_keys returned no 6-tuple");
                    goto error;
                }
            } else {
                written = w;
                key_count = kc;
            }
            if (written) {  /* IndexFile.put_keys's header values */
                n = n2; begin_ts = bts2; begin_phy = bphy2; slot_count = sc2;
                end_phy = phy;
                end_ts = store_ts;
            }
        }
        if (set_attr_i64(cq_mf, s_wrote_position, cq_pos + BCQ_UNIT) < 0 ||
            PyObject_SetAttr(cq, s_max_physic_offset, f[0]) < 0 || set_attr_i64(cq, s_max_offset, base + num) < 0)
            goto error;
        Py_SETREF(last_ts, Py_NewRef(f[6]));
        if (written < key_count) {  /* the rest of its keys go into the next index file: the caller's roll */
            Py_SETREF(partial, Py_BuildValue("(LLO)", (long long)written, (long long)key_count, res));
            if (partial == NULL) goto error;
            break;
        }
        if (popleft(appended) < 0 || popleft(sizes) < 0) goto error;
        offset = phy + size;
        count++;
        if (arrivals != Py_None) {
            PyObject *next = PyLong_FromLongLong(base + num);
            PyObject *a = next == NULL ? NULL : PyTuple_Pack(6, f[2], f[3], next, res, f[6], f[8]);
            Py_XDECREF(next);
            if (a == NULL) goto error;
            int rc = PyList_Append(arrivals, a);
            Py_DECREF(a);
            if (rc < 0) goto error;
        }
    }
    Py_CLEAR(entry); Py_CLEAR(head); Py_CLEAR(cq); Py_CLEAR(files); Py_CLEAR(cq_mf); Py_CLEAR(mv); Py_CLEAR(res);
    Py_CLEAR(fq); Py_CLEAR(is_batch);
    if (indexed) PyBuffer_Release(&idx_view);
    PyObject *out = Py_BuildValue("(LlNLLLLLLN)", (long long)offset, count, last_ts, (long long)n, (long long)begin_ts,
                                  (long long)begin_phy, (long long)slot_count, (long long)end_phy, (long long)end_ts,
                                  partial);
    return out;
error:
    Py_XDECREF(entry); Py_XDECREF(head); Py_XDECREF(cq); Py_XDECREF(files); Py_XDECREF(cq_mf); Py_XDECREF(mv);
    Py_XDECREF(res); Py_XDECREF(fq); Py_XDECREF(is_batch);
    Py_XDECREF(last_ts);
    Py_XDECREF(partial);  /* NULL when building it failed */
    if (indexed) PyBuffer_Release(&idx_view);
    return NULL;
}

static PyObject *hp_init(PyObject *self, PyObject *args) {
    PyObject *err, *crc, *enc_props, *enc_host, *known, *jhash, *idx, *check, *check_host;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &err, &crc, &enc_props, &enc_host, &known, &jhash, &idx, &check,
                          &check_host)) return NULL;
    Py_XSETREF(py_check_message, Py_NewRef(check));
    Py_XSETREF(py_check_host, Py_NewRef(check_host));
    Py_XSETREF(RecordError, Py_NewRef(err));
    Py_XSETREF(crc32_func, Py_NewRef(crc));
    Py_XSETREF(encode_properties_func, Py_NewRef(enc_props));
    Py_XSETREF(encode_host_func, Py_NewRef(enc_host));
    Py_XSETREF(known_properties_func, Py_NewRef(known));
    Py_XSETREF(java_hash_func, Py_NewRef(jhash));
    Py_XSETREF(py_index_put_keys, Py_NewRef(idx));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)hp_init, METH_VARARGS, "Register RecordError, the CRC function and the Python fallbacks."},
    {"prepare_record", (PyCFunction)(void (*)(void))hp_prepare_record, METH_FASTCALL | METH_KEYWORDS, NULL},
    {"write_record", (PyCFunction)(void (*)(void))hp_write_record, METH_FASTCALL, NULL},
    {"record_parts", (PyCFunction)(void (*)(void))hp_record_parts, METH_FASTCALL, NULL},
    {"offset_msg_id", (PyCFunction)(void (*)(void))hp_offset_msg_id, METH_FASTCALL, NULL},
    {"decode_dispatch_fields", (PyCFunction)(void (*)(void))hp_decode_dispatch_fields, METH_FASTCALL, NULL},
    {"body_crc_matches", (PyCFunction)(void (*)(void))hp_body_crc_matches, METH_FASTCALL, NULL},
    {"put_cq_unit", (PyCFunction)(void (*)(void))hp_put_cq_unit, METH_FASTCALL, NULL},
    {"put_bcq_unit", (PyCFunction)(void (*)(void))hp_put_bcq_unit, METH_FASTCALL, NULL},
    {"valid_units_end", (PyCFunction)(void (*)(void))hp_valid_units_end, METH_FASTCALL, NULL},
    {"first_record_stored_after", (PyCFunction)(void (*)(void))hp_first_record_stored_after, METH_FASTCALL, NULL},
    {"index_put_keys", (PyCFunction)(void (*)(void))hp_index_put_keys, METH_FASTCALL, NULL},
    {"check_message", (PyCFunction)(void (*)(void))hp_check_message, METH_FASTCALL, NULL},
    {"put_fast", (PyCFunction)(void (*)(void))hp_put_fast, METH_FASTCALL, NULL},
    {"java_string_hash", hp_java_string_hash, METH_O, NULL},
    {"index_key_hash", hp_index_key_hash, METH_O, NULL},
    {"tags_code", hp_tags_code, METH_O, NULL},
    {"hop_records", (PyCFunction)(void (*)(void))hp_hop_records, METH_FASTCALL, NULL},
    {"select_records", (PyCFunction)(void (*)(void))hp_select_records, METH_FASTCALL, NULL},
    {"dispatch_range", (PyCFunction)(void (*)(void))hp_dispatch_range, METH_FASTCALL, NULL},
    {"link_index_entries", (PyCFunction)(void (*)(void))hp_link_index_entries, METH_FASTCALL, NULL},
    {"cq_units_of", (PyCFunction)(void (*)(void))hp_cq_units_of, METH_FASTCALL, NULL},
    {"inner_batch_known", (PyCFunction)(void (*)(void))hp_inner_batch_known, METH_FASTCALL, NULL},
    {"buffer_inner_batch", (PyCFunction)(void (*)(void))hp_buffer_inner_batch, METH_FASTCALL, NULL},
    {"dispatch_inner_batch", (PyCFunction)(void (*)(void))hp_dispatch_inner_batch, METH_FASTCALL, NULL},
    {"dispatch_inner_batches", (PyCFunction)(void (*)(void))hp_dispatch_inner_batches, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hotpath", "Compiled twin of hot_py.py.", -1, methods};

PyMODINIT_FUNC PyInit__hotpath(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *st = PyImport_ImportModule("struct");
    if (st == NULL) return NULL;
    struct_error = PyObject_GetAttrString(st, "error");
    Py_DECREF(st);
    if (struct_error == NULL) return NULL;
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_topic, "topic"); INTERN(s_body, "body"); INTERN(s_properties, "properties");
    INTERN(s_queue_id, "queue_id"); INTERN(s_flag, "flag"); INTERN(s_sys_flag, "sys_flag");
    INTERN(s_born_timestamp, "born_timestamp"); INTERN(s_born_host, "born_host"); INTERN(s_store_host, "store_host");
    INTERN(s_reconsume_times, "reconsume_times"); INTERN(s_prepared_transaction_offset, "prepared_transaction_offset");
    INTERN(s_TAGS, "TAGS"); INTERN(s_KEYS, "KEYS"); INTERN(s_UNIQ_KEY, "UNIQ_KEY"); INTERN(s_INNER_NUM, "INNER_NUM"); INTERN(s_INNER_BASE, "INNER_BASE");
    INTERN(s_schedule_topic, "SCHEDULE_TOPIC_XXXX"); INTERN(s_keep_store_timestamp, "keep_store_timestamp");
    INTERN(s_store_timestamp, "store_timestamp");
    INTERN(s_popleft, "popleft"); INTERN(s_is_batch, "is_batch"); INTERN(s_max_offset, "max_offset");
    INTERN(s_max_physic_offset, "max_physic_offset"); INTERN(s_file_queue, "file_queue"); INTERN(s_files, "files");
    INTERN(s_mv, "mv"); INTERN(s_wrote_position, "wrote_position"); INTERN(s_file_size, "file_size");
    if ((valid_hosts = PyDict_New()) == NULL) return NULL;
#undef INTERN
    if (PyModule_AddStringConstant(m, "IMPLEMENTATION", "c") < 0) return NULL;
    crc_init();
    /* Which CRC the compiled BODYCRC uses for large bodies (the value is the same either way). */
    if (PyModule_AddStringConstant(m, "BODY_CRC", have_fold_crc ? "vpclmulqdq" : "registered") < 0) return NULL;
    return m;
}
