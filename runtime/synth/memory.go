package synth

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/synthgen/synthgen/runtime/model"
)

// AllowLargeMemory lifts the memory check of NewRun and ResumeRun: without
// it, a run whose model, optimizer state and workspace (model.Model's
// ParamBytes and WorkspaceBytes for the batch) would need more than
// MemoryLimit is an error naming the batch, the estimate and the limit,
// rather than a fatal out-of-memory crash while allocating (synth train
// -force).
func AllowLargeMemory() Option { return setter("large-memory", func(*options) {}) }

// MemoryLimit is the memory a process here may use, in bytes, and where
// that bound comes from: the smallest of the machine's memory (MemTotal in
// /proc/meminfo), the cgroup's limit (memory.max) and the address-space
// limit (RLIMIT_AS). It is 0 when none of them is known (not Linux): the
// memory checks are then skipped.
func MemoryLimit() (bytes int64, source string) {
	bytes, source, _ = memoryLimit()
	return bytes, source
}

// memoryLimit is MemoryLimit, and whether the bound is the address
// space's (which counts the memory mapped, not the memory used).
func memoryLimit() (bytes int64, source string, virtual bool) {
	consider := func(b int64, s string, v bool) {
		if b > 0 && (bytes == 0 || b < bytes) {
			bytes, source, virtual = b, s, v
		}
	}
	consider(memTotal(), "the machine's memory (MemTotal in /proc/meminfo)", false)
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			consider(v, "the cgroup's memory.max", false)
		}
	}
	consider(addressSpaceLimit(), "the address-space limit (RLIMIT_AS, ulimit -v)", true)
	return bytes, source, virtual
}

// selfStatus is the value in bytes of a "kB" line of /proc/self/status
// (VmSize: the address space mapped, VmRSS: the memory resident); 0 if
// unknown.
func selfStatus(key string) int64 { return kBLine("/proc/self/status", key) }

// memTotal is MemTotal of /proc/meminfo in bytes (0 if unknown).
func memTotal() int64 { return kBLine("/proc/meminfo", "MemTotal") }

// kBLine reads the line "key: <n> kB" of file (/proc's format) as bytes;
// 0 if it is missing or unreadable.
func kBLine(file, key string) int64 {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), key+":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// runBytes is the memory a training run of batch sequences needs on m: the
// parameters and their gradients, AdamW's two moments, and the workspace.
func runBytes(m *model.Model, batch int) (total, ws int64) {
	var moments int64
	for _, p := range m.Params {
		if !p.Frozen {
			moments += 2 * 4 * int64(len(p.Data))
		}
	}
	ws = m.WorkspaceBytes(batch)
	return m.ParamBytes() + moments + ws, ws
}

// overMemory says (as an OptionError's rule) that need bytes, ws of them
// the workspace, do not fit in what MemoryLimit leaves: the limit less
// what the process already holds (its resident memory, or under an
// address-space limit the space it has mapped), of which a fifth is left
// to the Go runtime's own overhead. It is "" when they fit or the limit is
// unknown.
func overMemory(need, ws int64) string {
	limit, source, virtual := memoryLimit()
	if limit == 0 {
		return ""
	}
	used := selfStatus("VmRSS")
	if virtual {
		used = selfStatus("VmSize")
	}
	avail := max(limit-used, 0) / 5 * 4
	if need <= avail {
		return ""
	}
	return fmt.Sprintf("needs about %s of memory (the workspace %s of it), over the %s this process may still use: the limit is %s, %s, and the process holds %s",
		gib(need), gib(ws), gib(avail), gib(limit), source, gib(used))
}

func gib(b int64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
