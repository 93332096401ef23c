/* The per-byte and per-word loops of `crawl dedupe`, compiled.
 *
 * Python defines what is computed; this file computes the same bytes and
 * numbers in single passes:
 *
 *   visible_folded(page)   crawl/text/extract.py's tokenizer regex and boilerplate
 *                          cut, for the folded (lower-cased) text dedupe hashes;
 *   hash_texts(texts, prefixes, n) crawl/dedupe/simhash.py's word hashes, block
 *                          cuts, block keys and whole-text simhashes;
 *   simhashes(words, spans, n) the shingle hashes and the bit vote;
 *   stack_cut, many_attributes, count_attributes, count_bytes
 *                          crawl/parse/budget.py's counts before a page is parsed
 *                          (the tokens and stack model, the attribute search and
 *                          counts), which on a 5 MB hostile page were 40-90 ms of
 *                          regex and Python loops.
 *
 * On a text-heavy page (28 KB, 4,000 words) these took most of dedupe's CPU
 * as a regex plus some fifty numpy passes. The Python versions stay as the
 * fallback where no C compiler was found at install time, and the tests hold
 * this file to them (and to the *_slow reference loops) on random input.
 *
 * Every constant and tag list comes from Python through configure_*() at
 * import, so there is one definition of each.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* simhash                                                                   */

static uint64_t K[4], Q, C, P;
static PyObject *long_hash; /* xxh3_64_intdigest, for words over 32 bytes */

#define ONES 0x0101010101010101ULL
#define HIGH 0x8080808080808080ULL
#define LOW7 0x7F7F7F7F7F7F7F7FULL

static inline uint64_t load8(const unsigned char *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    return x;
}

static const uint64_t KEEP[9] = {0, 0xff, 0xffff, 0xffffff, 0xffffffffULL, 0xffffffffffULL, 0xffffffffffffULL,
                                  0xffffffffffffffULL, ~0ULL}; /* [n]: the low n bytes */

/* the low n bytes (n <= 8) at p, little-endian, without reading past them */
static inline uint64_t load_part(const unsigned char *p, Py_ssize_t n)
{
    uint64_t x = 0;
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        x = x << 8 | p[i];
    return x;
}

/* sum(chunk_k * K_k) over the word's 8-byte little-endian chunks, zero past its end
 * (crawl.dedupe.simhash.word_hash_slow); xxh3 over 32 bytes. Sets *err on a Python error. */
static uint64_t word_hash(const unsigned char *p, Py_ssize_t n, Py_ssize_t room, int *err)
{
    if (n > 32) {
        PyObject *w = PyBytes_FromStringAndSize((const char *)p, n);
        PyObject *r = w ? PyObject_CallOneArg(long_hash, w) : NULL;
        Py_XDECREF(w);
        if (!r) {
            *err = 1;
            return 0;
        }
        uint64_t h = PyLong_AsUnsignedLongLongMask(r);
        Py_DECREF(r);
        if (h == (uint64_t)-1 && PyErr_Occurred())
            *err = 1;
        return h;
    }
    if (room >= 32) { /* the usual case, without a branch on the length: read 8, keep n */
        uint64_t h = (load8(p) & KEEP[n < 8 ? n : 8]) * K[0];
        h += (load8(p + 8) & KEEP[n < 8 ? 0 : n < 16 ? n - 8 : 8]) * K[1];
        if (n > 16) {
            h += (load8(p + 16) & KEEP[n < 24 ? n - 16 : 8]) * K[2];
            h += (load8(p + 24) & KEEP[n < 24 ? 0 : n - 24]) * K[3];
        }
        return h;
    }
    uint64_t h = 0;
    for (int k = 0; n > 0; k++, p += 8, n -= 8)
        h += load_part(p, n < 8 ? n : 8) * K[k];
    return h;
}

/* 8-bit masks of the bytes of x: above 0x20 (part of a word), and equal to '\n' */
static inline unsigned pack(uint64_t high_bits) { return (unsigned)(((high_bits >> 7) * 0x0102040810204080ULL) >> 56); }
static inline unsigned word_bytes(uint64_t x) { return pack((((x & LOW7) + 0x5F * ONES) | x) & HIGH); }
static inline unsigned newline_bytes(uint64_t x)
{
    uint64_t y = x ^ (0x0A * ONES);
    return pack(~(((y & LOW7) + LOW7) | y) & HIGH);
}

/* Scratch memory kept from call to call (the GIL is held throughout): fresh memory for every
 * group of pages cost a page fault per 4 KiB written, more than the hashing itself. */
typedef struct {
    void *v;
    size_t cap; /* bytes */
} Scratch;

static void *scratch(Scratch *s, size_t bytes)
{
    if (!s->v || bytes > s->cap) {
        size_t cap = bytes < 65536 ? 65536 : bytes + bytes / 2;
        void *v = PyMem_Realloc(s->v, cap);
        if (!v) {
            PyErr_NoMemory();
            return NULL;
        }
        s->v = v, s->cap = cap;
    }
    return s->v;
}

static void scratch_trim(Scratch *s);

/* done with a scratch: the shared one is trimmed and freed for the next call, one's own freed */
static void release_scratch(Scratch *s, int owner, int *busy)
{
    if (owner) {
        scratch_trim(s);
        *busy = 0;
    } else {
        PyMem_Free(s->v);
    }
}

static void scratch_trim(Scratch *s) /* an 8 MB page's worth is not kept */
{
    if (s->cap > (16u << 20)) {
        PyMem_Free(s->v);
        s->v = NULL, s->cap = 0;
    }
}

/* The words of p[0:len]: where each starts and ends (end: the separator after it, or len),
 * and whether a newline comes between it and the word before. Found 64 bytes at a time:
 * bit masks of word bytes and newlines (SWAR, 8 bytes per step), then a word starts where a
 * word byte follows a separator and ends where a separator follows a word byte, so each
 * word costs two bit scans, not a branch per byte. Returns the number of words (at most
 * len / 2 + 1: w must have room for that many), -1 on error. */
typedef struct {
    uint32_t *start, *end;
    unsigned char *after_newline;
} Words;

static Scratch bitmap_scratch;

static Py_ssize_t find_words(const unsigned char *p, Py_ssize_t len, Words *w)
{
    Py_ssize_t chunks = len / 64 + 1; /* one more than whole chunks: the last word's end is inside */
    uint64_t *ws = scratch(&bitmap_scratch, (size_t)chunks * 2 * sizeof(uint64_t));
    if (!ws)
        return -1;
    uint64_t *nl = ws + chunks;
    memset(ws, 0, (size_t)chunks * 2 * sizeof(uint64_t));
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x = load8(p + i);
        ws[i >> 6] |= (uint64_t)word_bytes(x) << (i & 63);
        nl[i >> 6] |= (uint64_t)newline_bytes(x) << (i & 63);
    }
    for (; i < len; i++) {
        ws[i >> 6] |= (uint64_t)(p[i] > 32) << (i & 63);
        nl[i >> 6] |= (uint64_t)(p[i] == '\n') << (i & 63);
    }
    Py_ssize_t ns = 0, ne = 0;
    uint64_t carry = 0; /* the last byte of the previous chunk was a word byte */
    for (Py_ssize_t c = 0; c < chunks; c++) {
        uint64_t x = ws[c], before = x << 1 | carry;
        uint64_t starts = x & ~before, ends = ~x & before;
        carry = x >> 63;
        for (; starts; starts &= starts - 1)
            w->start[ns++] = (uint32_t)(c * 64 + __builtin_ctzll(starts));
        for (; ends; ends &= ends - 1)
            w->end[ne++] = (uint32_t)(c * 64 + __builtin_ctzll(ends));
    }
    /* a word follows a newline when one lies between it and the word before: walk the
     * newlines (a few per block) and mark the first word after each, not a range test per word */
    memset(w->after_newline, 0, (size_t)ns);
    Py_ssize_t k = 0;
    for (Py_ssize_t c = 0; c < chunks; c++) {
        for (uint64_t x = nl[c]; x; x &= x - 1) {
            uint32_t q = (uint32_t)(c * 64 + __builtin_ctzll(x));
            while (k < ns && w->start[k] < q)
                k++;
            if (k >= ns)
                return ns;
            if (k > 0)
                w->after_newline[k] = 1;
        }
    }
    return ns;
}

static inline uint64_t mix(uint64_t x)
{
    x *= C;
    return x ^ x >> 32;
}

static int append_index(PyObject *list, Py_ssize_t i)
{
    PyObject *v = PyLong_FromSsize_t(i);
    int r = v ? PyList_Append(list, v) : -1;
    Py_XDECREF(v);
    return r;
}

static PyObject *configure_simhash(PyObject *self, PyObject *args)
{
    PyObject *fn;
    if (!PyArg_ParseTuple(args, "KKKKKKKO", &K[0], &K[1], &K[2], &K[3], &Q, &C, &P, &fn))
        return NULL;
    Py_XSETREF(long_hash, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static uint64_t vote(const uint64_t *w, Py_ssize_t count, Py_ssize_t n);

/* a block's key: the text's 8-byte prefix (dedupe: its host) and the block's hash, both big-endian */
static PyObject *block_key(uint64_t prefix, uint64_t block)
{
    unsigned char k[16];
    for (int i = 0; i < 8; i++) {
        k[i] = (unsigned char)(prefix >> (56 - 8 * i));
        k[8 + i] = (unsigned char)(block >> (56 - 8 * i));
    }
    return PyBytes_FromStringAndSize((const char *)k, 16);
}

static int append_key(PyObject *list, uint64_t prefix, uint64_t block)
{
    PyObject *k = block_key(prefix, block);
    int r = k ? PyList_Append(list, k) : -1;
    Py_XDECREF(k);
    return r;
}

/* hash_texts(texts, prefixes, n) -> (word hashes, cuts, block keys, simhashes): see crawl.dedupe.simhash.hash_texts */
static PyObject *hash_texts(PyObject *self, PyObject *args)
{
    PyObject *texts, *prefixes;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOn", &texts, &prefixes, &n))
        return NULL;
    if (!long_hash) {
        PyErr_SetString(PyExc_RuntimeError, "crawl.text._compiled.configure_simhash() was not called");
        return NULL;
    }
    if (n < 1)
        return PyErr_Format(PyExc_ValueError, "a shingle needs at least one word, got %zd", n);
    /* tuples, not the caller's lists: a prefix's __index__ (Python code) could change a list
     * between the pass that measures the texts and the one that reads them */
    PyObject *seq = PySequence_Tuple(texts);
    if (!seq)
        return NULL;
    PyObject *pre = PySequence_Tuple(prefixes);
    if (!pre) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t ntexts = PySequence_Fast_GET_SIZE(seq);
    if (PySequence_Fast_GET_SIZE(pre) != ntexts) {
        Py_DECREF(seq);
        Py_DECREF(pre);
        return PyErr_Format(PyExc_ValueError, "%zd texts but %zd prefixes", ntexts, PySequence_Fast_GET_SIZE(pre));
    }
    for (Py_ssize_t t = 0; t < ntexts; t++) {
        PyObject *b = PySequence_Fast_GET_ITEM(seq, t);
        if (!PyBytes_Check(b)) {
            Py_DECREF(seq);
            Py_DECREF(pre);
            return PyErr_Format(PyExc_TypeError, "texts must be bytes, not %.100s", Py_TYPE(b)->tp_name);
        }
    }
    /* where the words are, for every text first: then the hashes are written straight into
     * a bytes object of the right size. The scratch is shared between calls, but the hashing
     * calls xxh3 for long words, which may let another thread in: a call that finds the
     * shared scratch in use takes its own. */
    static Scratch shared;
    static int shared_busy;
    Scratch own = {NULL, 0};
    int owner = !shared_busy;
    Scratch *word_scratch = owner ? &shared : &own;
    shared_busy = 1;
    size_t bound = 0;
    for (Py_ssize_t t = 0; t < ntexts; t++) {
        Py_ssize_t len = PyBytes_GET_SIZE(PySequence_Fast_GET_ITEM(seq, t));
        if (len > (Py_ssize_t)UINT32_MAX - 64) {
            PyErr_Format(PyExc_ValueError, "a text of %zd bytes is too long to hash", len);
            goto fail_early;
        }
        bound += (size_t)len / 2 + 1;
    }
    uint32_t *starts = scratch(word_scratch, bound * (2 * sizeof(uint32_t) + 1));
    PyObject *cuts = PyList_New(ntexts), *keys = PyList_New(ntexts), *wholes = PyList_New(ntexts), *hashes = NULL;
    Py_ssize_t *counts = PyMem_Malloc((size_t)(ntexts + 1) * sizeof(Py_ssize_t));
    if (!counts)
        PyErr_NoMemory();
    if (!starts || !cuts || !keys || !wholes || !counts)
        goto fail;
    Words all = {starts, starts + bound, (unsigned char *)(starts + 2 * bound)};
    Py_ssize_t total = 0;
    for (Py_ssize_t t = 0; t < ntexts; t++) {
        PyObject *b = PySequence_Fast_GET_ITEM(seq, t);
        Words w = {all.start + total, all.end + total, all.after_newline + total};
        counts[t] = find_words((const unsigned char *)PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), &w);
        if (counts[t] < 0)
            goto fail;
        total += counts[t];
    }
    hashes = PyBytes_FromStringAndSize(NULL, total * 8);
    if (!hashes)
        goto fail;
    uint64_t *h = (uint64_t *)PyBytes_AS_STRING(hashes);
    int err = 0;
    Py_ssize_t nw = 0;
    for (Py_ssize_t t = 0; t < ntexts; t++) {
        PyObject *b = PySequence_Fast_GET_ITEM(seq, t);
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(b);
        Py_ssize_t len = PyBytes_GET_SIZE(b);
        uint64_t prefix = PyLong_AsUnsignedLongLongMask(PySequence_Fast_GET_ITEM(pre, t));
        if (prefix == (uint64_t)-1 && PyErr_Occurred())
            goto fail;
        PyObject *c = PyList_New(0), *k = PyList_New(0);
        if (!c || !k) {
            Py_XDECREF(c);
            Py_XDECREF(k);
            goto fail;
        }
        PyList_SET_ITEM(cuts, t, c);
        PyList_SET_ITEM(keys, t, k);
        if (append_index(c, nw) < 0)
            goto fail;
        Py_ssize_t first = nw, block = nw;
        uint64_t acc = 0, pw = 1; /* the block's sum(h_k * P**k), and P**k for its next word */
        for (Py_ssize_t i = 0; i < counts[t]; i++, nw++) {
            if (all.after_newline[nw]) { /* a block ends before this word */
                if (append_key(k, prefix, mix(acc + (uint64_t)(nw - block))) < 0 || append_index(c, nw) < 0)
                    goto fail;
                acc = 0, pw = 1, block = nw;
            }
            Py_ssize_t at = all.start[nw];
            uint64_t x = word_hash(p + at, (Py_ssize_t)all.end[nw] - at, len - at, &err);
            if (err)
                goto fail;
            h[nw] = x;
            acc += x * pw;
            pw *= P;
        }
        if (nw > first &&
            (append_key(k, prefix, mix(acc + (uint64_t)(nw - block))) < 0 || append_index(c, nw) < 0))
            goto fail;
        PyObject *v = PyLong_FromUnsignedLongLong(vote(h + first, nw - first, n));
        if (!v)
            goto fail;
        PyList_SET_ITEM(wholes, t, v);
    }
    scratch_trim(&bitmap_scratch);
    release_scratch(word_scratch, owner, &shared_busy);
    PyMem_Free(counts);
    Py_DECREF(seq);
    Py_DECREF(pre);
    return Py_BuildValue("(NNNN)", hashes, cuts, keys, wholes);
fail:
    PyMem_Free(counts);
    Py_XDECREF(hashes);
    Py_XDECREF(cuts);
    Py_XDECREF(keys);
    Py_XDECREF(wholes);
fail_early:
    release_scratch(word_scratch, owner, &shared_busy);
    Py_DECREF(seq);
    Py_DECREF(pre);
    return NULL;
}

/* a shingle's hash: Horner's rule over its n word hashes, then the mix (crawl.dedupe.simhash.shingle_hashes) */
static inline uint64_t shingle(const uint64_t *w, Py_ssize_t n)
{
    uint64_t x;
    if (n == 4) { /* the default, unrolled */
        x = ((w[3] * Q + w[2]) * Q + w[1]) * Q + w[0];
    } else {
        x = w[n - 1];
        for (Py_ssize_t j = n - 2; j >= 0; j--)
            x = x * Q + w[j];
    }
    return mix(x);
}

/* carry-save adder: three bit-planes in, their sum bit (low) and carry bit (high) out */
static inline void csa(uint64_t *high, uint64_t *low, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t u = a ^ b;
    *high = (a & b) | (u & c);
    *low = u ^ c;
}

/* total[8j + s] += weight * byte j of lane[s]; the lanes are emptied */
static void flush_lanes(uint64_t lane[8], uint64_t total[64], uint64_t weight)
{
    for (int s = 0; s < 8; s++) {
        for (int j = 0; j < 8; j++)
            total[8 * j + s] += weight * (lane[s] >> (8 * j) & 0xff);
        lane[s] = 0;
    }
}

/* The simhash of the n-word shingles of w[0:count] (fewer than n words: one shingle of all).
 *
 * Bit i is set when more than half the shingle hashes have it. The 64 column counts are kept
 * bit-sliced (Harley-Seal): carry-save adders fold 8 hashes into planes of weight 1, 2 and 4
 * and one word of weight 8, whose bits are counted in byte lanes (8 columns per uint64, 255
 * additions before a flush): about 7 operations a hash instead of 3 per bit-group of 8. */
static uint64_t vote(const uint64_t *w, Py_ssize_t count, Py_ssize_t n)
{
    if (count <= 0)
        return 0;
    if (n > count)
        n = count;
    Py_ssize_t m = count - n + 1, i = 0;
    uint64_t total[64] = {0}, lane[8] = {0}, ones = 0, twos = 0, fours = 0;
    int in_lanes = 0;
    for (; i + 8 <= m; i += 8) {
        uint64_t x[8], twos_a, twos_b, fours_a, fours_b, eights;
        for (int k = 0; k < 8; k++)
            x[k] = shingle(w + i + k, n);
        csa(&twos_a, &ones, ones, x[0], x[1]);
        csa(&twos_b, &ones, ones, x[2], x[3]);
        csa(&fours_a, &twos, twos, twos_a, twos_b);
        csa(&twos_a, &ones, ones, x[4], x[5]);
        csa(&twos_b, &ones, ones, x[6], x[7]);
        csa(&fours_b, &twos, twos, twos_a, twos_b);
        csa(&eights, &fours, fours, fours_a, fours_b);
        for (int s = 0; s < 8; s++)
            lane[s] += (eights >> s) & ONES;
        if (++in_lanes == 255) {
            flush_lanes(lane, total, 8);
            in_lanes = 0;
        }
    }
    flush_lanes(lane, total, 8);
    for (int bit = 0; bit < 64; bit++)
        total[bit] += (ones >> bit & 1) + 2 * (twos >> bit & 1) + 4 * (fours >> bit & 1);
    for (; i < m; i++) {
        uint64_t x = shingle(w + i, n);
        for (int bit = 0; bit < 64; bit++)
            total[bit] += x >> bit & 1;
    }
    uint64_t out = 0;
    for (int bit = 0; bit < 64; bit++)
        if (2 * total[bit] > (uint64_t)m)
            out |= 1ULL << bit;
    return out;
}

/* simhashes(words, spans, n) -> [simhash of the shingles of words[s:e] for (s, e) in spans] */
static PyObject *simhashes(PyObject *self, PyObject *args)
{
    PyObject *words, *spans, *seq = NULL, *out = NULL;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOn", &words, &spans, &n))
        return NULL;
    if (n < 1)
        return PyErr_Format(PyExc_ValueError, "a shingle needs at least one word, got %zd", n);
    Py_buffer buf;
    if (PyObject_GetBuffer(words, &buf, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (buf.itemsize != 8) {
        PyErr_Format(PyExc_ValueError, "word hashes must be 8 bytes each, got %zd", buf.itemsize);
        goto fail;
    }
    Py_ssize_t total = buf.len / 8;
    seq = PySequence_Tuple(spans); /* not the caller's list: an __index__ below may change it */
    out = seq ? PyList_New(PySequence_Fast_GET_SIZE(seq)) : NULL;
    if (!out)
        goto fail;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) {
        Py_ssize_t s, e;
        PyObject *pair = PySequence_Tuple(PySequence_Fast_GET_ITEM(seq, k)); /* (a list too) */
        int ok = pair && PyArg_ParseTuple(pair, "nn", &s, &e);
        Py_XDECREF(pair);
        if (!ok)
            goto fail;
        if (s < 0 || e < s || e > total) {
            PyErr_Format(PyExc_IndexError, "span (%zd, %zd) outside %zd words", s, e, total);
            goto fail;
        }
        PyObject *v = PyLong_FromUnsignedLongLong(vote((const uint64_t *)buf.buf + s, e - s, n));
        if (!v)
            goto fail;
        PyList_SET_ITEM(out, k, v);
    }
    Py_DECREF(seq);
    PyBuffer_Release(&buf);
    return out;
fail:
    Py_XDECREF(seq);
    Py_XDECREF(out);
    PyBuffer_Release(&buf);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* visible text (crawl/text/extract.py: _TOKEN, _visible, _cut, _implied_end)       */

/* A tag name set from Python: lower-case names, looked up by length then bytes. */
typedef struct {
    Py_ssize_t n;
    char **names;
    Py_ssize_t *lens;
} NameSet;

static NameSet RAW_TEXT, BLOCK, CONTAINER, VOID;

static void nameset_clear(NameSet *s)
{
    for (Py_ssize_t i = 0; i < s->n; i++)
        PyMem_Free(s->names[i]);
    PyMem_Free(s->names);
    PyMem_Free(s->lens);
    s->n = 0, s->names = NULL, s->lens = NULL;
}

static int nameset_set(NameSet *s, PyObject *iterable)
{
    PyObject *seq = PySequence_Fast(iterable, "tag names must be a sequence of bytes");
    if (!seq)
        return -1;
    nameset_clear(s);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    s->names = PyMem_Calloc((size_t)n + 1, sizeof(char *));
    s->lens = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    if (!s->names || !s->lens) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(b)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "tag names must be bytes");
            return -1;
        }
        s->lens[i] = PyBytes_GET_SIZE(b);
        s->names[i] = PyMem_Malloc((size_t)s->lens[i] + 1);
        if (!s->names[i]) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(s->names[i], PyBytes_AS_STRING(b), (size_t)s->lens[i] + 1);
        s->n = i + 1;
    }
    Py_DECREF(seq);
    return 0;
}

static unsigned char LOWER[256];

static inline int same_lower(const unsigned char *p, const char *name, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (LOWER[p[i]] != (unsigned char)name[i])
            return 0;
    return 1;
}

static int nameset_has(const NameSet *s, const unsigned char *p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < s->n; i++)
        if (s->lens[i] == n && same_lower(p, s->names[i], n))
            return 1;
    return 0;
}

static int configured_text;
static PyObject *reference_cache; /* (below: fold_reference) */

static PyObject *unescape;   /* html.unescape, for one character reference at a time */
static Py_UCS4 spaces[32];   /* the non-ASCII code points folded to ' ' (crawl.text._UNICODE_SPACES) */
static Py_ssize_t nspaces;

static void init_folded2(void);
static uint64_t name_seed;

static PyObject *configure_text(PyObject *self, PyObject *args)
{
    PyObject *raw, *block, *container, *isvoid, *fn, *space;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "OOOOOUK", &raw, &block, &container, &isvoid, &fn, &space, &seed))
        return NULL;
    name_seed = seed;
    if (nameset_set(&RAW_TEXT, raw) < 0 || nameset_set(&BLOCK, block) < 0 ||
        nameset_set(&CONTAINER, container) < 0 || nameset_set(&VOID, isvoid) < 0)
        return NULL;
    if (PyUnicode_GET_LENGTH(space) > 32)
        return PyErr_Format(PyExc_ValueError, "at most 32 space characters");
    nspaces = PyUnicode_GET_LENGTH(space);
    for (Py_ssize_t i = 0; i < nspaces; i++)
        spaces[i] = PyUnicode_READ_CHAR(space, i);
    Py_XSETREF(unescape, Py_NewRef(fn));
    init_folded2();
    Py_CLEAR(reference_cache); /* folded by the old configuration */
    configured_text = 1;
    Py_RETURN_NONE;
}

/* A-Z to a-z in place, 8 bytes a step: bytes.lower() without a table lookup per byte */
static inline uint64_t lower8(uint64_t x)
{
    uint64_t low7 = x & LOW7;
    uint64_t ge_a = low7 + (0x80 - 'A') * ONES; /* high bit: low 7 bits >= 'A' */
    uint64_t gt_z = low7 + (0x7F - 'Z') * ONES; /* high bit: low 7 bits > 'Z' */
    uint64_t upper = ge_a & ~gt_z & ~x & HIGH;  /* and the byte is ASCII */
    return x | upper >> 2;                      /* 0x80 >> 2 == 0x20 */
}

static void lower_ascii(unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        x = lower8(x);
        memcpy(p + i, &x, 8);
    }
    for (; i < n; i++)
        p[i] = LOWER[p[i]];
}

/* ------------------------------------------------------------------------ */
/* folding (crawl/text/extract.py: _entities, fold)                                 */

typedef struct {
    unsigned char *v;
    Py_ssize_t n, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t more);

static inline int buf_room(Buf *b, Py_ssize_t more)
{
    return b->n + more <= b->cap ? 0 : buf_grow(b, more);
}

static int buf_grow(Buf *b, Py_ssize_t more)
{
    Py_ssize_t cap = 2 * (b->n + more) + 256;
    unsigned char *v = PyMem_Realloc(b->v, (size_t)cap);
    if (!v) {
        PyErr_NoMemory();
        return -1;
    }
    b->v = v, b->cap = cap;
    return 0;
}

/* A code point folded as crawl.text folds it: lower case, a non-ASCII space made ' '. Returns
 * 1 when only Python's str.lower() can: U+0130 lowers to two code points, and a capital
 * sigma's lower case depends on the letters around it. */
static Py_UCS4 folded2[0x800]; /* fold_cp of U+0000-U+07FF (two-byte letters), 0 for "ask Python" */

static inline int fold_cp_slow(Py_UCS4 *c);

static inline int fold_cp(Py_UCS4 *c)
{
    if (*c < 0x800) {
        Py_UCS4 f = folded2[*c];
        if (!f)
            return 1;
        *c = f;
        return 0;
    }
    return fold_cp_slow(c);
}

static inline int fold_cp_slow(Py_UCS4 *c)
{
    Py_UCS4 x = *c;
    if (x == 0x130 || x == 0x3A3)
        return 1;
    if (x == 0x85 || x == 0xA0 || x >= 0x1680) { /* (where the spaces are: few letters get this far) */
        for (Py_ssize_t i = 0; i < nspaces; i++)
            if (x == spaces[i]) {
                *c = ' ';
                return 0;
            }
    }
    *c = Py_UNICODE_TOLOWER(x);
    return 0;
}

static void init_folded2(void)
{
    for (Py_UCS4 c = 1; c < 0x800; c++) { /* (U+0000 folds to itself, but 0 can't say so: Python does) */
        Py_UCS4 f = c;
        folded2[c] = fold_cp_slow(&f) ? 0 : f;
    }
}

/* c as UTF-8 at o (room for 4 bytes); past it */
static inline unsigned char *put_utf8(unsigned char *o, Py_UCS4 c)
{
    if (c < 0x80) {
        *o++ = (unsigned char)c;
    } else if (c < 0x800) {
        *o++ = (unsigned char)(0xC0 | c >> 6), *o++ = (unsigned char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *o++ = (unsigned char)(0xE0 | c >> 12), *o++ = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        *o++ = (unsigned char)(0x80 | (c & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | c >> 18), *o++ = (unsigned char)(0x80 | (c >> 12 & 0x3F));
        *o++ = (unsigned char)(0x80 | (c >> 6 & 0x3F)), *o++ = (unsigned char)(0x80 | (c & 0x3F));
    }
    return o;
}

/* the code point of the UTF-8 sequence at p[i] and its length; 0 if it is not valid UTF-8 */
static int utf8_at(const unsigned char *p, Py_ssize_t n, Py_ssize_t i, Py_UCS4 *c)
{
    unsigned char b = p[i];
    int len = b < 0x80 ? 1 : b >= 0xC2 && b < 0xE0 ? 2 : b >= 0xE0 && b < 0xF0 ? 3 : b >= 0xF0 && b < 0xF5 ? 4 : 0;
    if (!len || i + len > n)
        return 0;
    Py_UCS4 x = len == 1 ? b : len == 2 ? b & 0x1F : len == 3 ? b & 0x0F : b & 0x07;
    for (int k = 1; k < len; k++) {
        if ((p[i + k] & 0xC0) != 0x80)
            return 0;
        x = x << 6 | (p[i + k] & 0x3F);
    }
    if ((len == 3 && (x < 0x800 || (x >= 0xD800 && x < 0xE000))) || (len == 4 && (x < 0x10000 || x > 0x10FFFF)))
        return 0;
    *c = x;
    return len;
}

static inline int is_hex(unsigned char c) /* not isxdigit: that follows the locale */
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* html.unescape's pattern at p[i] == '&': &#digits;? | &#[xX]hex;? | &name;? with a name of
 * 1-32 code points other than \t \n \f space < & # ;. Where the match ends, or i if none. */
static Py_ssize_t charref_end(const unsigned char *p, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t j = i + 1;
    if (j < n && p[j] == '#') {
        Py_ssize_t k = j + 1;
        int hex = k < n && (p[k] == 'x' || p[k] == 'X');
        if (k < n && p[k] >= '0' && p[k] <= '9') {
            while (k < n && p[k] >= '0' && p[k] <= '9')
                k++;
        } else if (hex && k + 1 < n && is_hex(p[k + 1])) {
            k++;
            while (k < n && is_hex(p[k]))
                k++;
        } else {
            return i; /* '#' can't start a name */
        }
        return k < n && p[k] == ';' ? k + 1 : k;
    }
    Py_ssize_t count = 0;
    while (j < n && count < 32) {
        unsigned char c = p[j];
        if (c == '\t' || c == '\n' || c == '\f' || c == ' ' || c == '<' || c == '&' || c == '#' || c == ';')
            break;
        Py_UCS4 cp;
        int len = utf8_at(p, n, j, &cp);
        if (!len)
            return -1;
        j += len, count++;
    }
    if (!count)
        return i;
    return j < n && p[j] == ';' ? j + 1 : j;
}

/* is_utf8(data) -> whether data is valid UTF-8 (what bytes.decode("utf-8") accepts), without
 * building the str: ASCII 8 bytes a step */
static PyObject *is_utf8(PyObject *self, PyObject *arg)
{
    if (!PyBytes_Check(arg))
        return PyErr_Format(PyExc_TypeError, "data must be bytes, not %.100s", Py_TYPE(arg)->tp_name);
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg), i = 0;
    while (i < n) {
        while (i + 8 <= n && !(load8(p + i) & HIGH))
            i += 8;
        if (i >= n)
            break;
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        if (p[i] >= 0xC2 && p[i] < 0xE0 && i + 1 < n && (p[i + 1] & 0xC0) == 0x80) { /* most letters */
            i += 2;
            continue;
        }
        Py_UCS4 c;
        int len = utf8_at(p, n, i, &c);
        if (!len)
            Py_RETURN_FALSE;
        i += len;
    }
    Py_RETURN_TRUE;
}

/* A character reference, decoded by html.unescape and folded, appended to b; 1 if only
 * Python can fold it. A page repeats a few references (&amp; &nbsp; ...) many times, so
 * the folded bytes are kept per reference (up to 4,096 of them). */
static PyObject *reference_cache;

static int fold_reference(Buf *b, const unsigned char *ref, Py_ssize_t len)
{
    if (!reference_cache && !(reference_cache = PyDict_New()))
        return -1;
    PyObject *key = PyBytes_FromStringAndSize((const char *)ref, len);
    if (!key)
        return -1;
    PyObject *folded = PyDict_GetItemWithError(reference_cache, key), *owned = NULL; /* borrowed */
    if (!folded && PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    if (!folded) {
        PyObject *str = PyUnicode_DecodeUTF8((const char *)ref, len, NULL);
        PyObject *got = str ? PyObject_CallOneArg(unescape, str) : NULL;
        Py_XDECREF(str);
        if (!got || !PyUnicode_Check(got)) {
            Py_XDECREF(got);
            Py_DECREF(key);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "unescape did not return a str");
            return -1;
        }
        Buf one = {NULL, 0, 0};
        int r = 0;
        for (Py_ssize_t k = 0; !r && k < PyUnicode_GET_LENGTH(got); k++) {
            Py_UCS4 cp = PyUnicode_READ_CHAR(got, k);
            r = cp >= 0xD800 && cp < 0xE000 ? 1 : fold_cp(&cp);
            if (!r && !(r = buf_room(&one, 4)))
                one.n = put_utf8(one.v + one.n, cp) - one.v;
        }
        Py_DECREF(got);
        if (r < 0) {
            PyMem_Free(one.v);
            Py_DECREF(key);
            return -1;
        }
        folded = r ? Py_None : PyBytes_FromStringAndSize((const char *)one.v, one.n); /* None: Python folds */
        PyMem_Free(one.v);
        if (!folded) {
            Py_DECREF(key);
            return -1;
        }
        if (folded != Py_None)
            owned = folded; /* ours until used, the dict's too if kept */
        if (len <= 64) { /* not a megabyte of leading zeros kept from page to page */
            if (PyDict_GET_SIZE(reference_cache) >= 4096)
                PyDict_Clear(reference_cache);
            r = PyDict_SetItem(reference_cache, key, folded);
            if (r < 0) {
                Py_XDECREF(owned);
                Py_DECREF(key);
                return -1;
            }
        }
    }
    Py_DECREF(key);
    if (folded == Py_None)
        return 1;
    Py_ssize_t n = PyBytes_GET_SIZE(folded);
    if (buf_room(b, n) < 0) {
        Py_XDECREF(owned);
        return -1;
    }
    memcpy(b->v + b->n, PyBytes_AS_STRING(folded), (size_t)n);
    b->n += n;
    Py_XDECREF(owned);
    return 0;
}

/* fold_text(text, entities) -> the text as crawl.text folds it (ASCII and Unicode lower case,
 * non-ASCII spaces made ' ', character references decoded when `entities`), or None when only
 * Python can say (invalid UTF-8, U+0130, a capital sigma): the caller then folds it in Python.
 * Python decoded and lower-cased the whole text as one str (~350 us for 28 KB with a
 * single '&' or accented letter, against ~35 us for everything else on the page). */
static PyObject *fold_text(PyObject *self, PyObject *args)
{
    PyObject *text;
    int entities;
    if (!PyArg_ParseTuple(args, "Sp", &text, &entities))
        return NULL;
    if (!configured_text)
        return PyErr_Format(PyExc_RuntimeError, "crawl.text._compiled.configure_text() was not called");
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(text);
    Py_ssize_t n = PyBytes_GET_SIZE(text), i = 0;
    /* the output is as long as the input but for what a non-ASCII letter or a reference
     * adds: the room for what is left of the input is checked after each of those */
    Buf b = {NULL, 0, 0};
    if (buf_room(&b, n + 64) < 0)
        return NULL;
    unsigned char *o = b.v;
    const uint64_t amp = entities ? '&' * ONES : 0x80 * ONES; /* (0x80 bytes stop the fast path anyway) */
    while (i < n) {
        if (i + 8 <= n) { /* the ASCII bytes before the next '&' or non-ASCII one, 8 at a time */
            uint64_t x = load8(p + i), y = x ^ amp;
            uint64_t stop = (x | ~(((y & LOW7) + LOW7) | y)) & HIGH;
            uint64_t low = lower8(x);
            memcpy(o, &low, 8); /* (there is room for 64 more: the bytes past the stop are written over) */
            unsigned k = stop ? (unsigned)__builtin_ctzll(stop) >> 3 : 8;
            o += k, i += k;
            if (k)
                continue;
        }
        unsigned char c = p[i];
        if (c < 0x80 && (c != '&' || !entities)) {
            *o++ = LOWER[c];
            i++;
            continue;
        }
        if (c == '&') {
            Py_ssize_t end = charref_end(p, n, i);
            if (end < 0)
                goto python;
            if (end == i) {
                *o++ = '&';
                i++;
                continue;
            }
            b.n = o - b.v;
            int r = fold_reference(&b, p + i, end - i);
            if (r < 0)
                goto fail;
            if (r)
                goto python;
            o = b.v + b.n;
            i = end;
        } else {
            Py_UCS4 cp;
            int len;
            if (c >= 0xC2 && c < 0xE0 && i + 1 < n && (p[i + 1] & 0xC0) == 0x80) { /* 2 bytes: most letters */
                cp = (Py_UCS4)(c & 0x1F) << 6 | (p[i + 1] & 0x3F), len = 2;
                if (folded2[cp] == cp) { /* folds to itself (é, ß, а...): the same two bytes, no room needed */
                    *o++ = c, *o++ = p[i + 1];
                    i += 2;
                    continue;
                }
            } else if (!(len = utf8_at(p, n, i, &cp)))
                goto python;
            if (fold_cp(&cp))
                goto python;
            o = put_utf8(o, cp);
            i += len;
        }
        b.n = o - b.v;
        if (buf_room(&b, n - i + 64) < 0)
            goto fail;
        o = b.v + b.n;
    }
    b.n = o - b.v;
    PyObject *out = PyBytes_FromStringAndSize((const char *)b.v, b.n);
    PyMem_Free(b.v);
    return out;
python:
    PyMem_Free(b.v);
    Py_RETURN_NONE;
fail:
    PyMem_Free(b.v);
    return NULL;
}

/* a tag name ends before one of these (or at the end of the page) */
static inline int name_end(const unsigned char *p, Py_ssize_t n, Py_ssize_t j)
{
    if (j >= n)
        return 1;
    unsigned char c = p[j];
    return c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' ' || c == '/' || c == '>';
}

/* _VALUE at p[j] == '=': white space, then a quoted value (to its quote or the end).
 * Where it ends, or -1 when no quote follows (the '=' is then an ordinary byte). */
static Py_ssize_t quoted_value(const unsigned char *p, Py_ssize_t n, Py_ssize_t j)
{
    Py_ssize_t k = j + 1;
    while (k < n && (p[k] == '\t' || p[k] == '\n' || p[k] == '\f' || p[k] == '\r' || p[k] == ' '))
        k++;
    if (k >= n || (p[k] != '"' && p[k] != '\''))
        return -1;
    const unsigned char *q = memchr(p + k + 1, p[k], (size_t)(n - k - 1));
    return q ? q - p + 1 : n;
}

/* _REST: attributes up to and past '>' (a quoted value may hold '>'), or the end */
static Py_ssize_t rest_of_tag(const unsigned char *p, Py_ssize_t n, Py_ssize_t j)
{
    while (j < n) {
        if (p[j] == '>')
            return j + 1;
        if (p[j] == '=') {
            Py_ssize_t v = quoted_value(p, n, j);
            if (v >= 0) {
                j = v;
                continue;
            }
        }
        j++;
    }
    return n;
}

/* past '>' from j, or the end */
static inline Py_ssize_t past_gt(const unsigned char *p, Py_ssize_t n, Py_ssize_t j)
{
    if (j >= n)
        return n;
    const unsigned char *q = memchr(p + j, '>', (size_t)(n - j));
    return q ? q - p + 1 : n;
}

/* A raw-text element (script, style...) at p[i] == '<': where it ends, or -1 if it is not one */
static Py_ssize_t raw_text(const unsigned char *p, Py_ssize_t n, Py_ssize_t i)
{
    for (Py_ssize_t r = 0; r < RAW_TEXT.n; r++) {
        const char *name = RAW_TEXT.names[r];
        Py_ssize_t len = RAW_TEXT.lens[r];
        if (i + 1 + len > n || !same_lower(p + i + 1, name, len) || !name_end(p, n, i + 1 + len))
            continue;
        Py_ssize_t j = rest_of_tag(p, n, i + 1 + len);
        while (j < n) { /* the first "</name" that a name-ending byte follows */
            const unsigned char *q = memchr(p + j, '<', (size_t)(n - j));
            if (!q)
                break;
            Py_ssize_t k = q - p;
            if (k + 2 + len <= n && p[k + 1] == '/' && same_lower(p + k + 2, name, len) && name_end(p, n, k + 2 + len))
                return past_gt(p, n, k + 2 + len);
            j = k + 1;
        }
        return n;
    }
    return -1;
}

/* A comment at p[i:i+4] == "<!--": where it ends */
static Py_ssize_t comment(const unsigned char *p, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t j = i + 4;
    if (j < n && p[j] == '>')
        return j + 1;
    if (j + 1 < n && p[j] == '-' && p[j + 1] == '>')
        return j + 2;
    while (j < n) {
        const unsigned char *q = memchr(p + j, '-', (size_t)(n - j));
        if (!q)
            break;
        Py_ssize_t k = q - p;
        if (k + 2 < n && p[k + 1] == '-' && p[k + 2] == '>')
            return k + 3;
        if (k + 3 < n && p[k + 1] == '-' && p[k + 2] == '!' && p[k + 3] == '>')
            return k + 4;
        j = k + 1;
    }
    return n;
}

typedef struct {
    Py_ssize_t text_end;  /* the text before this token ends here (it starts where the last token ended) */
    Py_ssize_t end;       /* and the token ends here */
    Py_ssize_t id;        /* the tag name's number in this page; -1: comment, raw text, doctype */
    unsigned char is_end, closes, block, container, isvoid;
} Token;

/* Tag names numbered per page (so nesting counts are arrays): open addressing over (start, len) */
typedef struct {
    Py_ssize_t *slot;  /* -1 or an index into start/len */
    Py_ssize_t *start, *len;
    Py_ssize_t cap, n;
} Names;

/* FNV-1a from a per-process random start (name_seed, from configure_text), then a
 * multiply-xorshift: a page cannot be built offline whose tag names all fall in one chain of
 * the table (that made interning quadratic) */

static uint64_t name_hash(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = name_seed;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ LOWER[p[i]]) * 1099511628211ULL;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    return h ^ h >> 33;
}

static Py_ssize_t intern_name(Names *t, const unsigned char *page, Py_ssize_t start, Py_ssize_t len)
{
    if (2 * (t->n + 1) > t->cap) { /* grow: rehash into twice the slots */
        Py_ssize_t cap = t->cap ? 2 * t->cap : 64;
        Py_ssize_t *slot = PyMem_Malloc((size_t)cap * sizeof(Py_ssize_t));
        Py_ssize_t *st = PyMem_Realloc(t->start, (size_t)cap * sizeof(Py_ssize_t));
        if (st)
            t->start = st;
        Py_ssize_t *ln = PyMem_Realloc(t->len, (size_t)cap * sizeof(Py_ssize_t));
        if (ln)
            t->len = ln;
        if (!slot || !st || !ln) {
            PyMem_Free(slot);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t s = 0; s < cap; s++)
            slot[s] = -1;
        for (Py_ssize_t k = 0; k < t->n; k++) {
            Py_ssize_t s = (Py_ssize_t)(name_hash(page + t->start[k], t->len[k]) & (uint64_t)(cap - 1));
            while (slot[s] >= 0)
                s = (s + 1) & (cap - 1);
            slot[s] = k;
        }
        PyMem_Free(t->slot);
        t->slot = slot, t->cap = cap;
    }
    Py_ssize_t s = (Py_ssize_t)(name_hash(page + start, len) & (uint64_t)(t->cap - 1));
    for (; t->slot[s] >= 0; s = (s + 1) & (t->cap - 1)) {
        Py_ssize_t k = t->slot[s];
        if (t->len[k] == len) {
            Py_ssize_t i = 0;
            while (i < len && LOWER[page[t->start[k] + i]] == LOWER[page[start + i]])
                i++;
            if (i == len)
                return k;
        }
    }
    t->slot[s] = t->n, t->start[t->n] = start, t->len[t->n] = len;
    return t->n++;
}

/* _implied_end: an element opened at token `start` and never closed ends at the first
 * end tag of an element opened before it (a parser closes ours there too), or the page's end. */
static Py_ssize_t implied_end(const Token *tok, Py_ssize_t ntok, Py_ssize_t start, Py_ssize_t *opened)
{
    Py_ssize_t j = start + 1;
    for (; j < ntok; j++) {
        const Token *t = &tok[j];
        if (t->id < 0)
            continue;
        if (t->is_end) {
            if (!opened[t->id])
                break;
            opened[t->id]--;
        } else if (!t->isvoid && !t->closes) {
            opened[t->id]++;
        }
    }
    for (Py_ssize_t i = start + 1; i < j; i++) /* the counts go back to zero: no clearing of every name */
        if (tok[i].id >= 0)
            opened[tok[i].id] = 0;
    return j;
}

/* visible_folded(page) -> (text, body): the page's visible text lower-cased (ASCII), a newline
 * at every block tag, boilerplate elements cut, CR LF and CR read as LF; and the offset of the
 * first "<body" (any case), -1 if none. Entities and non-ASCII space are left to Python. */
static PyObject *visible_folded(PyObject *self, PyObject *arg)
{
    if (!configured_text) {
        PyErr_SetString(PyExc_RuntimeError, "crawl.text._compiled.configure_text() was not called");
        return NULL;
    }
    if (!PyBytes_Check(arg))
        return PyErr_Format(PyExc_TypeError, "page must be bytes, not %.100s", Py_TYPE(arg)->tp_name);
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg), body = -1;
    Py_ssize_t cap = 256, ntok = 0;
    Token *tok = PyMem_Malloc((size_t)cap * sizeof(Token));
    Names names = {NULL, NULL, NULL, 0, 0};
    Py_ssize_t *marks = NULL, *opened = NULL, *closer = NULL, *below = NULL, *top = NULL;
    unsigned char *drop = NULL;
    PyObject *out = NULL;
    if (!tok)
        goto nomem;
    Py_ssize_t i = 0;
    for (;;) { /* _TOKEN.split */
        const unsigned char *q = i < n ? memchr(p + i, '<', (size_t)(n - i)) : NULL;
        if (!q)
            break;
        Py_ssize_t at = q - p, end, id = -1, name_start = 0, name_len = 0;
        unsigned char is_end = 0, closes = 0;
        if ((end = raw_text(p, n, at)) >= 0) {
        } else if (at + 4 <= n && p[at + 1] == '!' && p[at + 2] == '-' && p[at + 3] == '-') {
            end = comment(p, n, at);
        } else {
            Py_ssize_t j = at + 1;
            is_end = j < n && p[j] == '/';
            j += is_end;
            if (j < n && LOWER[p[j]] >= 'a' && LOWER[p[j]] <= 'z') { /* a tag */
                name_start = j;
                while (!name_end(p, n, j))
                    j++;
                name_len = j - name_start;
                end = n;
                while (j < n) {
                    if (p[j] == '>') {
                        end = j + 1;
                        break;
                    }
                    if (p[j] == '/') {
                        if (j + 1 < n && p[j + 1] == '>') {
                            end = j + 2, closes = 1;
                            break;
                        }
                    } else if (p[j] == '=') {
                        Py_ssize_t v = quoted_value(p, n, j);
                        if (v >= 0) {
                            j = v;
                            continue;
                        }
                    }
                    j++;
                }
                if ((id = intern_name(&names, p, name_start, name_len)) < 0)
                    goto fail;
            } else if (at + 1 < n && (p[at + 1] == '!' || p[at + 1] == '?' || p[at + 1] == '/')) {
                is_end = 0;
                end = past_gt(p, n, at + 2);
            } else { /* '<' not starting a tag is text */
                i = at + 1;
                continue;
            }
        }
        if (ntok + 1 >= cap) {
            cap *= 2;
            Token *t = PyMem_Realloc(tok, (size_t)cap * sizeof(Token));
            if (!t)
                goto nomem;
            tok = t;
        }
        Token *t = &tok[ntok++];
        t->text_end = at, t->end = end, t->id = id, t->is_end = id >= 0 && is_end, t->closes = closes;
        t->block = id >= 0 && nameset_has(&BLOCK, p + name_start, name_len);
        t->container = id >= 0 && nameset_has(&CONTAINER, p + name_start, name_len);
        t->isvoid = id >= 0 && nameset_has(&VOID, p + name_start, name_len);
        i = end;
    }
    for (const unsigned char *q = p; (q = memchr(q, '<', (size_t)(n - (q - p)))) != NULL; q++)
        if (q + 5 <= p + n && same_lower(q + 1, "body", 4)) { /* where the head ends, for the canonical link */
            body = q - p;
            break;
        }
    /* _cut: drop[o] for o in out-index space: out[2k] is the text before token k, out[2k + 1] its separator.
     * Each element ends at the end tag that closes it (_closers: a stack per name; a form never
     * nests), else where a parser would close it; what a cut covers is not looked at again. */
    drop = PyMem_Calloc((size_t)(2 * ntok + 1), 1);
    marks = PyMem_Malloc((size_t)(ntok + 1) * sizeof(Py_ssize_t));
    closer = PyMem_Malloc((size_t)(ntok + 1) * sizeof(Py_ssize_t));
    below = PyMem_Malloc((size_t)(ntok + 1) * sizeof(Py_ssize_t));
    top = PyMem_Malloc((size_t)(names.n + 1) * sizeof(Py_ssize_t));
    opened = PyMem_Calloc((size_t)(names.n + 1), sizeof(Py_ssize_t));
    if (!drop || !marks || !closer || !below || !top || !opened)
        goto nomem;
    Py_ssize_t nm = 0, form = -1;
    for (Py_ssize_t k = 0; k < names.n; k++) {
        top[k] = -1;
        if (names.len[k] == 4 && same_lower(p + names.start[k], "form", 4))
            form = k;
    }
    for (Py_ssize_t k = 0; k < ntok; k++) {
        const Token *t = &tok[k];
        if (!t->container)
            continue;
        marks[nm++] = k;
        closer[k] = -1;
        if (t->is_end) {
            Py_ssize_t o = top[t->id];
            if (o >= 0 && t->id == form) { /* closes every form still open */
                for (; o >= 0; o = below[o])
                    closer[o] = k;
                top[t->id] = -1;
            } else if (o >= 0) {
                closer[o] = k;
                top[t->id] = below[o];
            }
        } else if (!t->closes) {
            below[k] = top[t->id];
            top[t->id] = k;
        }
    }
    for (Py_ssize_t k = 0; k < nm;) {
        Py_ssize_t start = marks[k++], end, stop;
        const Token *s = &tok[start];
        if (s->is_end || s->closes)
            continue;
        if (closer[start] >= 0) {
            end = closer[start];
            stop = 2 * end + 2;
        } else {
            end = implied_end(tok, ntok, start, opened);
            stop = 2 * end + 1;
        }
        Py_ssize_t lo = k, hi = nm; /* k = bisect_right(marks, end) */
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (marks[mid] <= end)
                lo = mid + 1;
            else
                hi = mid;
        }
        k = lo;
        memset(drop + 2 * start + 1, 1, (size_t)(stop - 2 * start - 1));
    }
    /* join, lower-cased; CR LF and a lone CR become LF */
    out = PyBytes_FromStringAndSize(NULL, n + ntok + 1);
    if (!out)
        goto fail;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out), *o0 = o;
    Py_ssize_t from = 0;
    for (Py_ssize_t k = 0; k <= ntok; k++) {
        Py_ssize_t to = k < ntok ? tok[k].text_end : n;
        if (!drop[2 * k] && to > from) {
            memcpy(o, p + from, (size_t)(to - from));
            o += to - from;
        }
        if (k < ntok) {
            if (!drop[2 * k + 1] && tok[k].block)
                *o++ = '\n';
            from = tok[k].end;
        }
    }
    Py_ssize_t len = o - o0, w = 0;
    lower_ascii(o0, len);
    if (memchr(o0, '\r', (size_t)len)) {
        for (Py_ssize_t r = 0; r < len; r++) {
            if (o0[r] == '\r') {
                o0[w++] = '\n';
                if (r + 1 < len && o0[r + 1] == '\n')
                    r++;
            } else {
                o0[w++] = o0[r];
            }
        }
        len = w;
    }
    PyMem_Free(tok), PyMem_Free(drop), PyMem_Free(marks), PyMem_Free(opened);
    PyMem_Free(closer), PyMem_Free(below), PyMem_Free(top);
    PyMem_Free(names.slot), PyMem_Free(names.start), PyMem_Free(names.len);
    if (_PyBytes_Resize(&out, len) < 0)
        return NULL;
    return Py_BuildValue("(Nn)", out, body);
nomem:
    PyErr_NoMemory();
fail:
    PyMem_Free(tok), PyMem_Free(drop), PyMem_Free(marks), PyMem_Free(opened);
    PyMem_Free(closer), PyMem_Free(below), PyMem_Free(top);
    PyMem_Free(names.slot), PyMem_Free(names.start), PyMem_Free(names.len);
    Py_XDECREF(out);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* crawl/parse/budget.py's stack model                                      */
/*
 * stack_cut(low, budget) reads a lower-cased page as budget._TOKEN does
 * (comments, raw-text elements, plaintext, tags, bogus comments: the same
 * tokens at the same offsets) and runs budget._stack_steps over them in the
 * same pass, without making a tuple per token. Python's version is the
 * definition and the fallback; tests/parse/test_budget_compiled.py holds
 * this one to it. The element tables come from configure_budget().
 */

static PyObject *bud_raw;      /* tuple of raw-text element names (bytes) */
static PyObject *bud_void;     /* frozenset of void element names */
static PyObject *bud_priority; /* dict name -> end priority */
static PyObject *bud_closes;   /* dict start tag -> frozenset of the open elements it closes */
static Py_ssize_t bud_max_depth;

static PyObject *configure_budget(PyObject *self, PyObject *args)
{
    PyObject *raw, *vd, *pr, *cl;
    Py_ssize_t depth;
    if (!PyArg_ParseTuple(args, "O!O!O!O!n", &PyTuple_Type, &raw, &PyFrozenSet_Type, &vd, &PyDict_Type, &pr,
                          &PyDict_Type, &cl, &depth))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(raw); i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(raw, i)))
            return PyErr_Format(PyExc_TypeError, "raw-text names must be bytes");
    Py_XSETREF(bud_raw, Py_NewRef(raw));
    Py_XSETREF(bud_void, Py_NewRef(vd));
    Py_XSETREF(bud_priority, Py_NewRef(pr));
    Py_XSETREF(bud_closes, Py_NewRef(cl));
    bud_max_depth = depth;
    Py_RETURN_NONE;
}

static inline int tok_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }
static inline int tok_stop(unsigned char c) { return tok_ws(c) || c == '/' || c == '>'; }

/* budget._REST from q: attributes up to '>', '/>' or the end. */
static Py_ssize_t tok_rest(const unsigned char *s, Py_ssize_t q, Py_ssize_t n)
{
    while (q < n) {
        unsigned char c = s[q];
        if (c == '>')
            break;
        if (c == '/') {
            if (q + 1 < n && s[q + 1] == '>')
                break;
            q++;
        } else if (c == '=') {
            q++;
            while (q < n && tok_ws(s[q]))
                q++;
            if (q < n && (s[q] == '"' || s[q] == '\'')) {
                const unsigned char *e = memchr(s + q + 1, s[q], (size_t)(n - q - 1));
                q = e ? (e - s) + 1 : n;
            }
        } else {
            q++;
        }
    }
    return q;
}

typedef struct {
    Py_ssize_t end;       /* where the next search starts */
    Py_ssize_t name, len; /* the element's name (for a start or end tag, or a raw-text element) */
    int slash, closing;   /* an end tag; a self-closing '/>' */
} BudToken;

/* The token budget._TOKEN matches at s[i] == '<'; 0 if it matches none there. */
static int tok_next(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, BudToken *t)
{
    Py_ssize_t p = i + 1;
    t->len = 0, t->slash = 0, t->closing = 0;
    if (n - p >= 3 && s[p] == '!' && s[p + 1] == '-' && s[p + 2] == '-') { /* comment */
        Py_ssize_t q = p + 3;
        if (q < n && s[q] == '>') {
            t->end = q + 1;
            return 1;
        }
        if (q + 1 < n && s[q] == '-' && s[q + 1] == '>') {
            t->end = q + 2;
            return 1;
        }
        for (;;) {
            const unsigned char *d = q < n ? memchr(s + q, '-', (size_t)(n - q)) : NULL;
            if (!d) {
                t->end = n;
                return 1;
            }
            q = d - s;
            if (q + 2 < n && s[q + 1] == '-' && s[q + 2] == '>') {
                t->end = q + 3;
                return 1;
            }
            if (q + 3 < n && s[q + 1] == '-' && s[q + 2] == '!' && s[q + 3] == '>') {
                t->end = q + 4;
                return 1;
            }
            q++;
        }
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(bud_raw); k++) { /* raw-text element */
        PyObject *name = PyTuple_GET_ITEM(bud_raw, k);
        Py_ssize_t m = PyBytes_GET_SIZE(name);
        const char *nm = PyBytes_AS_STRING(name);
        if (n - p > m && memcmp(s + p, nm, (size_t)m) == 0 && tok_stop(s[p + m])) {
            Py_ssize_t q = tok_rest(s, p + m, n);
            if (q < n && s[q] != '>')
                break; /* '/>': read as a tag below */
            t->name = p, t->len = m;
            if (q >= n) {
                t->end = n;
                return 1;
            }
            for (q = q + 1;; q++) { /* to "</name" and one of white space, '/', '>' */
                const unsigned char *lt = q < n ? memchr(s + q, '<', (size_t)(n - q)) : NULL;
                if (!lt) {
                    t->end = n;
                    return 1;
                }
                q = lt - s;
                if (n - q > m + 2 && s[q + 1] == '/' && memcmp(s + q + 2, nm, (size_t)m) == 0
                    && tok_stop(s[q + 2 + m])) {
                    t->end = q;
                    return 1;
                }
            }
        }
    }
    if (n - p > 9 && memcmp(s + p, "plaintext", 9) == 0 && tok_stop(s[p + 9])) {
        t->end = n;
        return 1;
    }
    Py_ssize_t q = p + (p < n && s[p] == '/');
    if (q < n && s[q] >= 'a' && s[q] <= 'z') { /* a start or end tag */
        Py_ssize_t e = q + 1;
        while (e < n && !tok_stop(s[e]))
            e++;
        t->slash = q > p, t->name = q, t->len = e - q;
        e = tok_rest(s, e, n);
        if (e + 1 < n && s[e] == '/' && s[e + 1] == '>')
            t->closing = 1, t->end = e + 2;
        else
            t->end = e < n ? e + 1 : n;
        return 1;
    }
    if (p < n && (s[p] == '!' || s[p] == '?' || s[p] == '/')) { /* bogus comment */
        const unsigned char *g = memchr(s + p + 1, '>', (size_t)(n - p - 1));
        t->end = g ? (g - s) + 1 : n;
        return 1;
    }
    return 0;
}

/* budget._NAME_VALUE from s[k] (not white space, '/' or '>'): one attribute's name and value. */
static Py_ssize_t attr_name_value(const unsigned char *s, Py_ssize_t k, Py_ssize_t end)
{
    k++;
    while (k < end && !tok_stop(s[k]) && s[k] != '=')
        k++;
    Py_ssize_t j = k;
    while (j < end && tok_ws(s[j]))
        j++;
    if (j < end && s[j] == '=') {
        j++;
        while (j < end && tok_ws(s[j]))
            j++;
        if (j < end && (s[j] == '"' || s[j] == '\'')) {
            const unsigned char *q = memchr(s + j + 1, s[j], (size_t)(end - j - 1));
            j = q ? (q - s) + 1 : end;
        } else {
            while (j < end && !tok_ws(s[j]) && s[j] != '>')
                j++;
        }
        k = j;
    }
    return k;
}

static int attr_range(PyObject *args, Py_buffer *buf, Py_ssize_t *start, Py_ssize_t *end, const char *fmt)
{
    *start = 0, *end = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTuple(args, fmt, buf, start, end))
        return -1;
    if (*end > buf->len)
        *end = buf->len;
    if (*start < 0)
        *start = 0;
    return 0;
}

/* len(budget._ONE.findall(data, start, end)) */
static PyObject *count_attributes(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t i, end, count = 0;
    if (attr_range(args, &buf, &i, &end, "y*|nn") < 0)
        return NULL;
    const unsigned char *s = buf.buf;
    while (i < end) {
        if (tok_stop(s[i])) {
            i++;
            continue;
        }
        i = attr_name_value(s, i, end);
        count++;
    }
    PyBuffer_Release(&buf);
    return PyLong_FromSsize_t(count);
}

/* budget._attributes: the start of the first tag (from any '<' and a letter) with more
 * than max attributes, or where those counted in tags of `many` or more pass `total`. */
static PyObject *many_attributes(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t end, many, max, total, counted = 0;
    if (!PyArg_ParseTuple(args, "y*nnnn", &buf, &end, &many, &max, &total))
        return NULL;
    if (end > buf.len)
        end = buf.len;
    const unsigned char *s = buf.buf;
    for (Py_ssize_t i = 0; i + 1 < end; i++) {
        const unsigned char *lt = memchr(s + i, '<', (size_t)(end - i));
        if (!lt)
            break;
        i = lt - s;
        if (i + 1 >= end || !((s[i + 1] | 32) >= 'a' && (s[i + 1] | 32) <= 'z'))
            continue;
        Py_ssize_t j = i + 2, n = 0;
        while (j < end && !tok_stop(s[j]))
            j++;
        Py_ssize_t name_end = j;
        while (n <= max) {
            while (j < end && (tok_ws(s[j]) || (s[j] == '/' && !(j + 1 < end && s[j + 1] == '>'))))
                j++;
            if (j >= end || tok_stop(s[j]))
                break;
            j = attr_name_value(s, j, end);
            n++;
        }
        if (n >= many) {
            counted += n;
            if (n > max || counted > total) {
                PyBuffer_Release(&buf);
                return PyLong_FromSsize_t(i);
            }
        } else {
            /* so have the tags from a '<' inside this name, which share its end and
             * attributes: past the name, so `<b<b<b...` is one pass, not n*n */
            i = name_end - 1;
        }
    }
    PyBuffer_Release(&buf);
    Py_RETURN_NONE;
}

/* sum(data.count(bytes([c])) for c in chars): budget._attribute_bound in one pass */
static PyObject *count_bytes(PyObject *self, PyObject *args)
{
    Py_buffer buf, set;
    if (!PyArg_ParseTuple(args, "y*y*", &buf, &set))
        return NULL;
    unsigned char in[256] = {0};
    for (Py_ssize_t k = 0; k < set.len; k++)
        in[((const unsigned char *)set.buf)[k]] = 1;
    const unsigned char *s = buf.buf;
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < buf.len; i++)
        count += in[s[i]];
    PyBuffer_Release(&buf);
    PyBuffer_Release(&set);
    return PyLong_FromSsize_t(count);
}

typedef struct {
    long rank;
    int is_void, kind; /* kind: 1 html, 2 body, 3 head (budget._DISCARDED), else 0 */
    PyObject *name, *closes;
    Py_ssize_t opened;
} BudElement;

static PyObject *stack_cut(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    long long budget;
    if (!bud_raw)
        return PyErr_Format(PyExc_RuntimeError, "crawl.text._compiled.configure_budget() was not called");
    if (!PyArg_ParseTuple(args, "y*L", &buf, &budget))
        return NULL;
    const unsigned char *s = buf.buf;
    Py_ssize_t n = buf.len, i = 0, ti = -1, ne = 0, cap = 64, depth = 0;
    PyObject *ids = PyDict_New(), *result = NULL;
    BudElement *el = PyMem_Malloc((size_t)cap * sizeof(BudElement));
    Py_ssize_t *stack = PyMem_Malloc((size_t)(bud_max_depth + 1) * sizeof(Py_ssize_t));
    long long steps = 0;
    Py_ssize_t discarded = 0, changes = 0, blocked_depth = -1, blocked_changes = -1, blocked_name = -1;
    long long blocked_steps = 0;
    BudToken t;
    Py_ssize_t at = 0;
    if (!ids || !el || !stack) {
        PyErr_NoMemory();
        goto done;
    }
    while (i < n) {
        const unsigned char *lt = memchr(s + i, '<', (size_t)(n - i));
        if (!lt)
            break;
        at = lt - s;
        if (!tok_next(s, at, n, &t)) {
            i = at + 1;
            continue;
        }
        i = t.end;
        ti++;
        if (!t.len)
            continue; /* comments, doctypes, bogus comments, plaintext */
        /* the element's id */
        PyObject *key = PyBytes_FromStringAndSize((const char *)s + t.name, t.len);
        if (!key)
            goto done;
        PyObject *found = PyDict_GetItemWithError(ids, key);
        Py_ssize_t id;
        if (found) {
            id = PyLong_AsSsize_t(found);
            Py_DECREF(key);
        } else {
            if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto done;
            }
            if (ne == cap) {
                BudElement *more = PyMem_Realloc(el, (size_t)(cap *= 2) * sizeof(BudElement));
                if (!more) {
                    Py_DECREF(key);
                    PyErr_NoMemory();
                    goto done;
                }
                el = more;
            }
            BudElement *e = &el[ne];
            PyObject *rank = PyDict_GetItemWithError(bud_priority, key);
            e->rank = rank ? PyLong_AsLong(rank) : 100;
            int v = PySet_Contains(bud_void, key);
            e->closes = PyDict_GetItemWithError(bud_closes, key); /* borrowed: the dict holds it */
            if (v < 0 || PyErr_Occurred()) {
                Py_DECREF(key);
                goto done;
            }
            e->is_void = v;
            e->kind = (t.len == 4 && memcmp(s + t.name, "html", 4) == 0) ? 1
                      : (t.len == 4 && memcmp(s + t.name, "body", 4) == 0) ? 2
                      : (t.len == 4 && memcmp(s + t.name, "head", 4) == 0) ? 3 : 0;
            e->name = key; /* owned by ids below, and by this entry */
            e->opened = 0;
            PyObject *num = PyLong_FromSsize_t(ne);
            if (!num || PyDict_SetItem(ids, key, num) < 0) {
                Py_XDECREF(num);
                Py_DECREF(key);
                goto done;
            }
            Py_DECREF(num);
            Py_DECREF(key); /* the dict keeps it alive while ids lives */
            id = ne++;
        }
        BudElement *e = &el[id];
        if (t.slash) {
            if (depth && stack[depth - 1] == id && !(discarded && e->kind)) {
                depth--, e->opened--, changes++;
                continue;
            }
            if (discarded && e->kind) {
                discarded--;
                continue;
            }
            if (!e->opened) {
                steps += depth;
            } else if (blocked_depth == depth && blocked_changes == changes && blocked_name == id) {
                steps += blocked_steps;
            } else {
                Py_ssize_t j = depth - 1;
                while (stack[j] != id)
                    j--;
                steps += depth - j;
                int blocks = 0;
                for (Py_ssize_t k = j + 1; k < depth && !blocks; k++)
                    blocks = el[stack[k]].rank > e->rank;
                if (blocks) {
                    steps += depth - j;
                    blocked_depth = depth, blocked_changes = changes, blocked_name = id;
                    blocked_steps = 2 * (long long)(depth - j);
                } else {
                    changes++;
                    for (Py_ssize_t k = j; k < depth; k++)
                        el[stack[k]].opened--;
                    depth = j;
                }
            }
        } else {
            if (e->kind) {
                if (e->kind == 2) {
                    steps += depth;
                    if (steps > budget)
                        break;
                }
                if ((e->kind == 2 && e->opened) || (e->kind == 1 && depth) || (e->kind == 3 && depth != 1)) {
                    discarded++;
                    continue;
                }
            }
            if (e->closes) {
                while (depth) {
                    int in = PySet_Contains(e->closes, el[stack[depth - 1]].name);
                    if (in < 0)
                        goto done;
                    if (!in)
                        break;
                    el[stack[--depth]].opened--;
                    changes++;
                }
            }
            if (t.closing || e->is_void || depth >= bud_max_depth)
                continue;
            stack[depth++] = id;
            e->opened++;
            changes++;
            continue;
        }
        if (steps > budget)
            break;
    }
    if (steps > budget)
        result = Py_BuildValue("(nn)", ti, at);
    else
        result = Py_NewRef(Py_None);
done:
    PyMem_Free(el), PyMem_Free(stack);
    Py_XDECREF(ids);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"configure_simhash", configure_simhash, METH_VARARGS,
     "configure_simhash(k0, k1, k2, k3, q, c, p, long_hash): crawl.dedupe.simhash's constants"},
    {"configure_text", configure_text, METH_VARARGS,
     "configure_text(raw_text, block, container, void): crawl.text's tag names (lower-case bytes)"},
    {"hash_texts", hash_texts, METH_VARARGS, "hash_texts(texts, prefixes, n) -> (word hashes, cuts, block keys, simhashes)"},
    {"simhashes", simhashes, METH_VARARGS, "simhashes(words, spans, n) -> [simhash per span]"},
    {"is_utf8", is_utf8, METH_O, "is_utf8(data) -> whether bytes.decode('utf-8') would accept data"},
    {"fold_text", fold_text, METH_VARARGS, "fold_text(text, entities) -> folded text, or None: fold it in Python"},
    {"configure_budget", configure_budget, METH_VARARGS,
     "configure_budget(raw, void, priority, closes, max_depth): crawl.parse.budget's element tables"},
    {"stack_cut", stack_cut, METH_VARARGS,
     "stack_cut(low, budget) -> (token index, offset) where budget._stack_steps passes budget, or None"},
    {"count_attributes", count_attributes, METH_VARARGS,
     "count_attributes(data, start=0, end=len) -> len(budget._ONE.findall(data, start, end))"},
    {"many_attributes", many_attributes, METH_VARARGS,
     "many_attributes(data, end, many, max, total) -> budget._attributes(data, end)"},
    {"count_bytes", count_bytes, METH_VARARGS, "count_bytes(data, chars) -> how many bytes of data are in chars"},
    {"visible_folded", visible_folded, METH_O, "visible_folded(page) -> (folded visible text, offset of <body or -1)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "crawl.text._compiled", "Compiled hot loops of crawl dedupe (see crawl/text/_compiled.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__compiled(void)
{
    for (int c = 0; c < 256; c++)
        LOWER[c] = (unsigned char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return PyModule_Create(&module);
}
