/*
 * libnvidia-ml.so.1 stand-in: answers the NVML calls slonk-health makes (through pynvml) from a
 * plain-text profile, so the container test tier has GPU nodes without GPUs.
 *
 * It implements only what pynvml resolves for slonk-health (pynvml looks each function up when it is
 * first called, so anything else is simply absent and reads as NVML_ERROR_FUNCTION_NOT_FOUND). Struct
 * layouts follow nvml.h as pynvml declares them in ctypes; the sizes are checked below. It is meant
 * for one thread at a time, as slonk-health uses NVML.
 *
 * Profile
 * -------
 * Read on every nvmlInit* call (so a test can change it between runs) from $SLONK_NVML_PROFILE, or
 * /etc/nvml-standin/profile when that is unset or empty. No file: nvmlInit returns
 * NVML_ERROR_DRIVER_NOT_LOADED (9); an unreadable one NVML_ERROR_NO_PERMISSION (4); a line it does
 * not understand NVML_ERROR_UNKNOWN (999), with the file and line on stderr.
 *
 * One setting a line; blank lines and lines starting with '#' are ignored; numbers are decimal or
 * 0x-hex. The keys are those of slonk-health's NVML recordings (slonk-health-nvml/1):
 *
 *   driverVersion 580.159.04              nvmlSystemGetDriverVersion
 *   deviceCount 8                         nvmlDeviceGetCount (default: highest gpu index + 1)
 *   initError 15                          nvmlInit fails with this code after reading the file
 *   error <nvmlFunction> <code>           that system-wide function returns <code>
 *   hang <nvmlFunction>                   that system-wide function never returns (nvmlInit*, nvmlShutdown too)
 *
 *   gpu <i> name <text to end of line>    nvmlDeviceGetName
 *   gpu <i> uuid GPU-...                  nvmlDeviceGetUUID
 *   gpu <i> pciBusId 00000000:00:06.0     nvmlDeviceGetPciInfo_v3 (busId, domain, bus, device)
 *   gpu <i> minorNumber <n>               nvmlDeviceGetMinorNumber (default: <i>)
 *   gpu <i> eccMode <current> <pending>   nvmlDeviceGetEccMode (1 enabled, 0 disabled)
 *   gpu <i> eccErrors.<uncorrected|corrected>.<volatile|aggregate> <n>
 *                                         nvmlDeviceGetTotalEccErrors
 *   gpu <i> remappedRows <correctable> <uncorrectable> <pending> <failure>
 *                                         nvmlDeviceGetRemappedRows
 *   gpu <i> pcie.currentGen <n>           nvmlDeviceGetCurrPcieLinkGeneration
 *   gpu <i> pcie.maxGen <n>               nvmlDeviceGetMaxPcieLinkGeneration
 *   gpu <i> pcie.gpuMaxGen <n>            nvmlDeviceGetGpuMaxPcieLinkGeneration
 *   gpu <i> pcie.currentWidth <n>         nvmlDeviceGetCurrPcieLinkWidth
 *   gpu <i> pcie.maxWidth <n>             nvmlDeviceGetMaxPcieLinkWidth
 *   gpu <i> clockEventReasons <mask>      nvmlDeviceGetCurrentClocks{Event,Throttle}Reasons
 *   gpu <i> temperature <C>               nvmlDeviceGetTemperature (sensor 0, the GPU die)
 *   gpu <i> performanceState <n>          nvmlDeviceGetPerformanceState
 *   gpu <i> memory <total> <reserved> <used>
 *                                         nvmlDeviceGetMemoryInfo_v2; nvmlDeviceGetMemoryInfo (v1)
 *                                         counts the reserved bytes as used
 *   gpu <i> computeProcesses [<pid>:<bytes>|<pid>:- ...]
 *                                         nvmlDeviceGetComputeRunningProcesses_v3 (nothing after
 *                                         the key: no process; '-': memory use not available)
 *   gpu <i> supportedEventTypes <mask>    nvmlDeviceGetSupportedEventTypes
 *   gpu <i> xid <code>                    an XID (nvmlEventTypeXidCriticalError) event pending
 *   gpu <i> event <type> <data>           any event pending
 *   gpu <i> error <nvmlFunction> <code>   that function returns <code> for this GPU
 *   gpu <i> hang <nvmlFunction>           that function never returns for this GPU
 *
 * A GPU value the profile does not set answers NVML_ERROR_NOT_SUPPORTED, as a GPU without the
 * feature does. A pending event is delivered once per nvmlInit, by nvmlEventSetWait_v2 on an event
 * set the GPU was registered on for its type; with none left, the wait sleeps its timeout and
 * returns NVML_ERROR_TIMEOUT. "error" names the versioned function pynvml calls (e.g.
 * nvmlDeviceGetCount_v2); code 13 (FUNCTION_NOT_FOUND) makes pynvml behave as if the function were
 * absent from the driver. pciDeviceId and pciSubSystemId read 0. "hang" is what a GPU or driver that has
 * stopped answering does to NVML (a GSP firmware timeout, the driver stuck on its lock): the call sleeps
 * until the process ends. (A GPU fallen off the bus answers GPU_IS_LOST instead: "error ... 15".) Unlike
 * a call stuck in the kernel, this sleep ends with a signal.
 */

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- nvml.h: return codes, types and structs (as pynvml 13 declares them) ---- */

typedef int nvmlReturn_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_MEMORY 20
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN 999

#define NVML_VALUE_NOT_AVAILABLE_UINT 0xFFFFFFFFu
#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFull
#define NVML_EVENT_TYPE_XID_CRITICAL 0x8ull
#define NVML_STRUCT_VERSION(type, ver) ((unsigned int)(sizeof(type) | ((ver) << 24u)))

typedef struct standin_device *nvmlDevice_t;
typedef struct standin_event_set *nvmlEventSet_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId offset");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
_Static_assert(NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2) == 0x02000028u, "nvmlMemory_v2 version");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_v2_t layout");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");

/* ---- the profile, as loaded ---- */

#define MAX_GPUS 64
#define MAX_PROCS 32
#define MAX_EVENTS 16
#define MAX_ERRORS 16
#define TEXT 96

enum {
    HAVE_NAME = 1u << 0,
    HAVE_UUID = 1u << 1,
    HAVE_PCI = 1u << 2,
    HAVE_ECC_MODE = 1u << 3,
    HAVE_REMAPPED = 1u << 4,
    HAVE_CLOCKS = 1u << 5,
    HAVE_TEMPERATURE = 1u << 6,
    HAVE_PSTATE = 1u << 7,
    HAVE_MEMORY = 1u << 8,
    HAVE_PROCESSES = 1u << 9,
    HAVE_EVENT_TYPES = 1u << 10,
    HAVE_MINOR = 1u << 11,
};

/* Numbers that each have a key of their own: "have" bit = 1 << (16 + position). */
enum {
    U_ECC_UNC_VOL, /* eccErrors.uncorrected.volatile */
    U_ECC_UNC_AGG,
    U_ECC_COR_VOL,
    U_ECC_COR_AGG,
    U_PCIE_CUR_GEN,
    U_PCIE_MAX_GEN,
    U_PCIE_GPU_MAX_GEN,
    U_PCIE_CUR_WIDTH,
    U_PCIE_MAX_WIDTH,
    U_COUNT
};

static const char *const SINGLE_KEYS[U_COUNT] = {
    "eccErrors.uncorrected.volatile",
    "eccErrors.uncorrected.aggregate",
    "eccErrors.corrected.volatile",
    "eccErrors.corrected.aggregate",
    "pcie.currentGen",
    "pcie.maxGen",
    "pcie.gpuMaxGen",
    "pcie.currentWidth",
    "pcie.maxWidth",
};

struct injected_error {
    char function[64];
    nvmlReturn_t code;
};

struct pending_event {
    unsigned long long type;
    unsigned long long data;
    int delivered;
};

struct standin_device {
    unsigned int index;
    unsigned long have;
    char name[TEXT];
    char uuid[TEXT];
    char bus_id[32];
    unsigned int pci_domain, pci_bus, pci_device;
    unsigned int minor;
    unsigned int ecc_current, ecc_pending;
    unsigned int remapped[4];
    unsigned long long single[U_COUNT];
    unsigned long long clock_reasons;
    unsigned int temperature;
    int pstate;
    unsigned long long mem_total, mem_reserved, mem_used;
    unsigned int nprocs;
    nvmlProcessInfo_t procs[MAX_PROCS];
    unsigned long long event_types;
    unsigned int nevents;
    struct pending_event events[MAX_EVENTS];
    unsigned int nerrors;
    struct injected_error errors[MAX_ERRORS];
};

struct standin_event_set {
    unsigned long long mask[MAX_GPUS];
};

static struct {
    int refcount;
    char driver_version[TEXT];
    int have_driver_version;
    unsigned int device_count;
    unsigned int nerrors;
    struct injected_error errors[MAX_ERRORS];
    struct standin_device devices[MAX_GPUS];
} g;

/* ---- profile parsing ---- */

static int parse_u64(const char *text, unsigned long long *out)
{
    char *end = NULL;
    if (text == NULL || *text == '\0' || *text == '-')
        return -1;
    errno = 0;
    *out = strtoull(text, &end, 0);
    return (errno != 0 || end == NULL || *end != '\0') ? -1 : 0;
}

static int parse_uint(const char *text, unsigned int *out)
{
    unsigned long long v;
    if (parse_u64(text, &v) != 0 || v > 0xFFFFFFFFull)
        return -1;
    *out = (unsigned int)v;
    return 0;
}

static int copy_text(char *dst, size_t size, const char *src)
{
    if (src == NULL || *src == '\0' || strlen(src) >= size)
        return -1;
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

/* Splits the rest of a line into at most `max` whitespace-separated words; returns how many. */
static int split(char *text, char **words, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *w = strtok_r(text, " \t", &save); w != NULL; w = strtok_r(NULL, " \t", &save)) {
        if (n == max)
            return max + 1;
        words[n++] = w;
    }
    return n;
}

/* The injected "code" of a function that never returns (no NVML return code has this value). */
#define HANG_CODE ((nvmlReturn_t)0x7fffffff)

static int add_hang(struct injected_error *errors, unsigned int *n, char *rest)
{
    char *w[2];
    if (split(rest, w, 1) != 1 || *n >= MAX_ERRORS)
        return -1;
    if (copy_text(errors[*n].function, sizeof errors[*n].function, w[0]) != 0)
        return -1;
    errors[*n].code = HANG_CODE;
    (*n)++;
    return 0;
}

static int add_error(struct injected_error *errors, unsigned int *n, char *rest)
{
    char *w[3];
    unsigned int code;
    if (split(rest, w, 2) != 2 || *n >= MAX_ERRORS || parse_uint(w[1], &code) != 0 || code == 0)
        return -1;
    if (copy_text(errors[*n].function, sizeof errors[*n].function, w[0]) != 0)
        return -1;
    errors[*n].code = (nvmlReturn_t)code;
    (*n)++;
    return 0;
}

static int parse_bus_id(struct standin_device *d, const char *text)
{
    unsigned int domain, bus, device, function;
    char tail;
    if (copy_text(d->bus_id, sizeof d->bus_id, text) != 0)
        return -1;
    if (sscanf(text, "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4)
        return -1;
    d->pci_domain = domain;
    d->pci_bus = bus;
    d->pci_device = device;
    return 0;
}

static int parse_processes(struct standin_device *d, char *rest)
{
    char *w[MAX_PROCS + 1];
    int n = split(rest, w, MAX_PROCS);
    if (n > MAX_PROCS)
        return -1;
    for (int i = 0; i < n; i++) {
        char *colon = strchr(w[i], ':');
        nvmlProcessInfo_t *p = &d->procs[i];
        if (colon == NULL)
            return -1;
        *colon = '\0';
        if (parse_uint(w[i], &p->pid) != 0)
            return -1;
        if (strcmp(colon + 1, "-") == 0)
            p->usedGpuMemory = NVML_VALUE_NOT_AVAILABLE_ULL;
        else if (parse_u64(colon + 1, &p->usedGpuMemory) != 0)
            return -1;
        p->gpuInstanceId = NVML_VALUE_NOT_AVAILABLE_UINT; /* no MIG */
        p->computeInstanceId = NVML_VALUE_NOT_AVAILABLE_UINT;
    }
    d->nprocs = (unsigned int)n;
    d->have |= HAVE_PROCESSES;
    return 0;
}

static int add_event(struct standin_device *d, unsigned long long type, unsigned long long data)
{
    if (d->nevents >= MAX_EVENTS || type == 0)
        return -1;
    d->events[d->nevents].type = type;
    d->events[d->nevents].data = data;
    d->events[d->nevents].delivered = 0;
    d->nevents++;
    return 0;
}

/* Reads `want` numbers from `rest` into `out`. */
static int parse_uints(char *rest, unsigned int *out, int want)
{
    char *w[8];
    if (split(rest, w, want) != want)
        return -1;
    for (int i = 0; i < want; i++)
        if (parse_uint(w[i], &out[i]) != 0)
            return -1;
    return 0;
}

static int parse_one_u64(char *rest, unsigned long long *out)
{
    char *w[2];
    return (split(rest, w, 1) == 1 && parse_u64(w[0], out) == 0) ? 0 : -1;
}

static int parse_gpu_key(struct standin_device *d, const char *key, char *rest)
{
    unsigned int u[4];
    unsigned long long v;
    char *w[4];

    for (int i = 0; i < U_COUNT; i++) {
        if (strcmp(key, SINGLE_KEYS[i]) == 0) {
            if (parse_one_u64(rest, &d->single[i]) != 0)
                return -1;
            d->have |= 1ul << (16 + i);
            return 0;
        }
    }
    if (strcmp(key, "name") == 0) {
        d->have |= HAVE_NAME;
        return copy_text(d->name, sizeof d->name, rest);
    }
    if (strcmp(key, "uuid") == 0) {
        d->have |= HAVE_UUID;
        return (split(rest, w, 1) == 1) ? copy_text(d->uuid, sizeof d->uuid, w[0]) : -1;
    }
    if (strcmp(key, "pciBusId") == 0) {
        d->have |= HAVE_PCI;
        return (split(rest, w, 1) == 1) ? parse_bus_id(d, w[0]) : -1;
    }
    if (strcmp(key, "minorNumber") == 0) {
        d->have |= HAVE_MINOR;
        return parse_uints(rest, &d->minor, 1);
    }
    if (strcmp(key, "eccMode") == 0) {
        if (parse_uints(rest, u, 2) != 0 || u[0] > 1 || u[1] > 1)
            return -1;
        d->ecc_current = u[0];
        d->ecc_pending = u[1];
        d->have |= HAVE_ECC_MODE;
        return 0;
    }
    if (strcmp(key, "remappedRows") == 0) {
        d->have |= HAVE_REMAPPED;
        return parse_uints(rest, d->remapped, 4);
    }
    if (strcmp(key, "clockEventReasons") == 0) {
        d->have |= HAVE_CLOCKS;
        return parse_one_u64(rest, &d->clock_reasons);
    }
    if (strcmp(key, "temperature") == 0) {
        d->have |= HAVE_TEMPERATURE;
        return parse_uints(rest, &d->temperature, 1);
    }
    if (strcmp(key, "performanceState") == 0) {
        if (parse_uints(rest, u, 1) != 0 || u[0] > 32)
            return -1;
        d->pstate = (int)u[0];
        d->have |= HAVE_PSTATE;
        return 0;
    }
    if (strcmp(key, "memory") == 0) {
        if (split(rest, w, 3) != 3 || parse_u64(w[0], &d->mem_total) != 0 ||
            parse_u64(w[1], &d->mem_reserved) != 0 || parse_u64(w[2], &d->mem_used) != 0 ||
            d->mem_reserved + d->mem_used > d->mem_total)
            return -1;
        d->have |= HAVE_MEMORY;
        return 0;
    }
    if (strcmp(key, "computeProcesses") == 0)
        return parse_processes(d, rest);
    if (strcmp(key, "supportedEventTypes") == 0) {
        d->have |= HAVE_EVENT_TYPES;
        return parse_one_u64(rest, &d->event_types);
    }
    if (strcmp(key, "xid") == 0)
        return (parse_one_u64(rest, &v) == 0) ? add_event(d, NVML_EVENT_TYPE_XID_CRITICAL, v) : -1;
    if (strcmp(key, "event") == 0) {
        unsigned long long type, data;
        if (split(rest, w, 2) != 2 || parse_u64(w[0], &type) != 0 || parse_u64(w[1], &data) != 0)
            return -1;
        return add_event(d, type, data);
    }
    if (strcmp(key, "error") == 0)
        return add_error(d->errors, &d->nerrors, rest);
    if (strcmp(key, "hang") == 0)
        return add_hang(d->errors, &d->nerrors, rest);
    return -1;
}

/* Splits "key rest" at the first blank; rest has its leading blanks removed ("" when none). */
static char *cut_word(char *line, char **rest)
{
    char *p = line + strcspn(line, " \t");
    if (*p != '\0')
        *p++ = '\0';
    p += strspn(p, " \t");
    *rest = p;
    return line;
}

static int parse_line(char *line, unsigned int *highest, int *count_set, nvmlReturn_t *init_error)
{
    char *rest;
    char *key = cut_word(line, &rest);
    unsigned int u;

    if (strcmp(key, "gpu") == 0) {
        char *index_text = cut_word(rest, &rest);
        char *gpu_key = cut_word(rest, &rest);
        if (parse_uint(index_text, &u) != 0 || u >= MAX_GPUS || *gpu_key == '\0')
            return -1;
        if (u + 1 > *highest)
            *highest = u + 1;
        return parse_gpu_key(&g.devices[u], gpu_key, rest);
    }
    if (strcmp(key, "driverVersion") == 0) {
        char *w[2];
        g.have_driver_version = 1;
        return (split(rest, w, 1) == 1) ? copy_text(g.driver_version, sizeof g.driver_version, w[0]) : -1;
    }
    if (strcmp(key, "deviceCount") == 0) {
        if (parse_uints(rest, &u, 1) != 0 || u > MAX_GPUS)
            return -1;
        g.device_count = u;
        *count_set = 1;
        return 0;
    }
    if (strcmp(key, "initError") == 0) {
        if (parse_uints(rest, &u, 1) != 0)
            return -1;
        *init_error = (nvmlReturn_t)u;
        return 0;
    }
    if (strcmp(key, "error") == 0)
        return add_error(g.errors, &g.nerrors, rest);
    if (strcmp(key, "hang") == 0)
        return add_hang(g.errors, &g.nerrors, rest);
    return -1;
}

static nvmlReturn_t load_profile(void)
{
    const char *path = getenv("SLONK_NVML_PROFILE");
    char line[1024];
    unsigned int highest = 0, lineno = 0;
    int count_set = 0;
    nvmlReturn_t init_error = NVML_SUCCESS;
    FILE *f;

    if (path == NULL || *path == '\0')
        path = "/etc/nvml-standin/profile";
    f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT ? NVML_ERROR_DRIVER_NOT_LOADED
               : (errno == EACCES || errno == EPERM) ? NVML_ERROR_NO_PERMISSION
                                                     : NVML_ERROR_UNKNOWN;

    memset(&g.devices, 0, sizeof g.devices);
    g.have_driver_version = 0;
    g.driver_version[0] = '\0';
    g.device_count = 0;
    g.nerrors = 0;
    for (unsigned int i = 0; i < MAX_GPUS; i++)
        g.devices[i].index = i;

    while (fgets(line, sizeof line, f) != NULL) {
        size_t len = strlen(line);
        char *start;
        lineno++;
        if (len > 0 && line[len - 1] != '\n' && !feof(f)) {
            fprintf(stderr, "nvml stand-in: %s:%u: line too long\n", path, lineno);
            fclose(f);
            return NVML_ERROR_UNKNOWN;
        }
        line[strcspn(line, "\r\n")] = '\0';
        start = line + strspn(line, " \t");
        if (*start == '\0' || *start == '#')
            continue;
        for (char *end = start + strlen(start); end > start && (end[-1] == ' ' || end[-1] == '\t');)
            *--end = '\0';
        if (parse_line(start, &highest, &count_set, &init_error) != 0) {
            fprintf(stderr, "nvml stand-in: %s:%u: cannot read this line (see standin.c for the format)\n",
                    path, lineno);
            fclose(f);
            return NVML_ERROR_UNKNOWN;
        }
    }
    fclose(f);
    if (!count_set)
        g.device_count = highest;
    for (unsigned int i = 0; i < MAX_GPUS; i++)
        if (!(g.devices[i].have & HAVE_MINOR))
            g.devices[i].minor = i;
    return init_error;
}

/* ---- helpers every call goes through ---- */

/* Never returns: sleeps a second at a time until the process ends. */
static void hang_forever(void)
{
    for (;;) {
        struct timespec second = {1, 0};
        nanosleep(&second, NULL);
    }
}

static nvmlReturn_t injected(const struct injected_error *errors, unsigned int n, const char *function)
{
    for (unsigned int i = 0; i < n; i++) {
        if (strcmp(errors[i].function, function) != 0)
            continue;
        if (errors[i].code == HANG_CODE)
            hang_forever();
        return errors[i].code;
    }
    return NVML_SUCCESS;
}

/* Initialised, no error injected for `function` system-wide. */
static nvmlReturn_t system_call(const char *function)
{
    if (g.refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    return injected(g.errors, g.nerrors, function);
}

/* Initialised, a handle of a visible GPU, no error injected for `function` on it. */
static nvmlReturn_t device_call(nvmlDevice_t d, const char *function)
{
    if (g.refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (d == NULL || d < &g.devices[0] || d >= &g.devices[MAX_GPUS] || d->index >= g.device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    return injected(d->errors, d->nerrors, function);
}

#define CHECK(expr)                                                                                        \
    do {                                                                                                   \
        nvmlReturn_t rc_ = (expr);                                                                         \
        if (rc_ != NVML_SUCCESS)                                                                           \
            return rc_;                                                                                    \
    } while (0)

#define DEVICE_CALL(device) CHECK(device_call((device), __func__))
#define NEED(device, bit)                                                                                  \
    do {                                                                                                   \
        if (!((device)->have & (bit)))                                                                     \
            return NVML_ERROR_NOT_SUPPORTED;                                                               \
    } while (0)
#define NONNULL(p)                                                                                         \
    do {                                                                                                   \
        if ((p) == NULL)                                                                                   \
            return NVML_ERROR_INVALID_ARGUMENT;                                                            \
    } while (0)

static nvmlReturn_t give_text(char *dst, unsigned int length, const char *src)
{
    NONNULL(dst);
    if (strlen(src) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t give_single(nvmlDevice_t d, int which, unsigned long long *out)
{
    NONNULL(out);
    if (!(d->have & (1ul << (16 + which))))
        return NVML_ERROR_NOT_SUPPORTED;
    *out = d->single[which];
    return NVML_SUCCESS;
}

static nvmlReturn_t give_single_uint(nvmlDevice_t d, int which, unsigned int *out)
{
    unsigned long long v;
    NONNULL(out);
    CHECK(give_single(d, which, &v));
    *out = (unsigned int)v;
    return NVML_SUCCESS;
}

/* ---- initialisation ---- */

static nvmlReturn_t init(const char *function)
{
    nvmlReturn_t rc = load_profile();
    if (rc != NVML_SUCCESS)
        return rc;
    /* Only a hang applies here: an init failure is the profile's initError. */
    for (unsigned int i = 0; i < g.nerrors; i++)
        if (g.errors[i].code == HANG_CODE && strcmp(g.errors[i].function, function) == 0)
            hang_forever();
    g.refcount++;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return init(__func__);
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return init(__func__); }

EXPORT nvmlReturn_t nvmlInit(void) { return init(__func__); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (g.refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    (void)injected(g.errors, g.nerrors, __func__); /* only a hang: shutting down never fails here */
    g.refcount--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 8: return "Insufficient External Power";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 11: return "Interrupt Request Issue";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 14: return "Corrupted infoROM";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request.";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case 20: return "Insufficient Memory";
    case 25: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

/* ---- system ---- */

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    CHECK(system_call(__func__));
    if (!g.have_driver_version)
        return NVML_ERROR_NOT_SUPPORTED;
    return give_text(version, length, g.driver_version);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    CHECK(system_call(__func__));
    NONNULL(deviceCount);
    *deviceCount = g.device_count;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (g.refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= g.device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    CHECK(injected(g.devices[index].errors, g.devices[index].nerrors, __func__));
    *device = &g.devices[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* ---- identity ---- */

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEVICE_CALL(device);
    NONNULL(index);
    *index = device->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_NAME);
    return give_text(name, length, device->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_UUID);
    return give_text(uuid, length, device->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    DEVICE_CALL(device);
    NONNULL(minorNumber);
    *minorNumber = device->minor;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_PCI);
    NONNULL(pci);
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", device->pci_domain & 0xFFFFu,
             device->pci_bus & 0xFFu, device->pci_device & 0xFFu);
    pci->domain = device->pci_domain;
    pci->bus = device->pci_bus;
    pci->device = device->pci_device;
    memcpy(pci->busId, device->bus_id, sizeof pci->busId);
    return NVML_SUCCESS;
}

/* ---- ECC and row remapping ---- */

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, int *current, int *pending)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_ECC_MODE);
    NONNULL(current);
    NONNULL(pending);
    *current = (int)device->ecc_current;
    *pending = (int)device->ecc_pending;
    return NVML_SUCCESS;
}

/* errorType: 0 corrected, 1 uncorrected; counterType: 0 volatile, 1 aggregate. */
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                                unsigned long long *eccCounts)
{
    DEVICE_CALL(device);
    if (errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->have & HAVE_ECC_MODE && !device->ecc_current)
        return NVML_ERROR_NOT_SUPPORTED; /* counters need ECC on */
    return give_single(device, errorType ? (counterType ? U_ECC_UNC_AGG : U_ECC_UNC_VOL)
                                         : (counterType ? U_ECC_COR_AGG : U_ECC_COR_VOL),
                       eccCounts);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                              unsigned int *isPending, unsigned int *failureOccurred)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_REMAPPED);
    NONNULL(corrRows);
    NONNULL(uncRows);
    NONNULL(isPending);
    NONNULL(failureOccurred);
    *corrRows = device->remapped[0];
    *uncRows = device->remapped[1];
    *isPending = device->remapped[2];
    *failureOccurred = device->remapped[3];
    return NVML_SUCCESS;
}

/* ---- PCIe link ---- */

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
    DEVICE_CALL(device);
    return give_single_uint(device, U_PCIE_CUR_GEN, currLinkGen);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen)
{
    DEVICE_CALL(device);
    return give_single_uint(device, U_PCIE_MAX_GEN, maxLinkGen);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGenDevice)
{
    DEVICE_CALL(device);
    return give_single_uint(device, U_PCIE_GPU_MAX_GEN, maxLinkGenDevice);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
    DEVICE_CALL(device);
    return give_single_uint(device, U_PCIE_CUR_WIDTH, currLinkWidth);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth)
{
    DEVICE_CALL(device);
    return give_single_uint(device, U_PCIE_MAX_WIDTH, maxLinkWidth);
}

/* ---- clocks, temperature, power state ---- */

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *reasons)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_CLOCKS);
    NONNULL(reasons);
    *reasons = device->clock_reasons;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_CLOCKS);
    NONNULL(reasons);
    *reasons = device->clock_reasons;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, unsigned int *temp)
{
    DEVICE_CALL(device);
    if (sensorType != 0) /* NVML_TEMPERATURE_GPU is the only sensor */
        return NVML_ERROR_INVALID_ARGUMENT;
    NEED(device, HAVE_TEMPERATURE);
    NONNULL(temp);
    *temp = device->temperature;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, int *pState)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_PSTATE);
    NONNULL(pState);
    *pState = device->pstate;
    return NVML_SUCCESS;
}

/* ---- memory and processes ---- */

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_MEMORY);
    NONNULL(memory);
    memory->total = device->mem_total;
    memory->used = device->mem_used + device->mem_reserved;
    memory->free = device->mem_total - memory->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    DEVICE_CALL(device);
    NONNULL(memory);
    if (memory->version != NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2))
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    NEED(device, HAVE_MEMORY);
    memory->total = device->mem_total;
    memory->reserved = device->mem_reserved;
    memory->used = device->mem_used;
    memory->free = device->mem_total - device->mem_reserved - device->mem_used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                            nvmlProcessInfo_t *infos)
{
    unsigned int room;
    DEVICE_CALL(device);
    NEED(device, HAVE_PROCESSES);
    NONNULL(infoCount);
    room = *infoCount;
    *infoCount = device->nprocs;
    if (device->nprocs == 0)
        return NVML_SUCCESS;
    if (infos == NULL || room < device->nprocs)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(infos, device->procs, device->nprocs * sizeof *infos);
    return NVML_SUCCESS;
}

/* ---- events ---- */

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    DEVICE_CALL(device);
    NEED(device, HAVE_EVENT_TYPES);
    NONNULL(eventTypes);
    *eventTypes = device->event_types;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    CHECK(system_call(__func__));
    NONNULL(set);
    *set = calloc(1, sizeof **set);
    return *set == NULL ? NVML_ERROR_MEMORY : NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set)
{
    DEVICE_CALL(device);
    NONNULL(set);
    NEED(device, HAVE_EVENT_TYPES);
    if (eventTypes & ~device->event_types)
        return NVML_ERROR_NOT_SUPPORTED;
    set->mask[device->index] |= eventTypes;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    struct timespec pause;
    CHECK(system_call(__func__));
    NONNULL(set);
    NONNULL(data);
    for (unsigned int i = 0; i < g.device_count; i++) {
        struct standin_device *d = &g.devices[i];
        for (unsigned int e = 0; e < d->nevents; e++) {
            if (d->events[e].delivered || !(d->events[e].type & set->mask[i]))
                continue;
            d->events[e].delivered = 1;
            data->device = d;
            data->eventType = d->events[e].type;
            data->eventData = d->events[e].data;
            data->gpuInstanceId = NVML_VALUE_NOT_AVAILABLE_UINT;
            data->computeInstanceId = NVML_VALUE_NOT_AVAILABLE_UINT;
            return NVML_SUCCESS;
        }
    }
    pause.tv_sec = timeoutms / 1000;
    pause.tv_nsec = (long)(timeoutms % 1000) * 1000000L;
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
        ;
    return NVML_ERROR_TIMEOUT;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    CHECK(system_call(__func__));
    free(set);
    return NVML_SUCCESS;
}
