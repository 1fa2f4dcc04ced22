package x86enc

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestGoAsmAssembles feeds the GoAsm lines of every recorded encoding,
// inside a TEXT block, to Go's own assembler (go tool asm) and checks it
// accepts them.
func TestGoAsmAssembles(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		t.Skipf("go command not found at %s: %v", goTool, err)
	}
	var b strings.Builder
	b.WriteString("#include \"textflag.h\"\n\nTEXT ·f(SB), NOSPLIT, $0-0\n")
	for _, c := range cases {
		in, err := c.enc()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("\t" + in.GoAsm() + "\n")
	}
	b.WriteString("\tRET\n")
	dir := t.TempDir()
	src := filepath.Join(dir, "f_amd64.s")
	if err := os.WriteFile(src, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	inc := filepath.Join(runtime.GOROOT(), "pkg", "include")
	cmd := exec.Command(goTool, "tool", "asm", "-p", "p", "-I", inc, "-o", filepath.Join(dir, "f.o"), src)
	cmd.Env = append(os.Environ(), "GOARCH=amd64", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go tool asm rejected the GoAsm lines: %v\n%s\n%s", err, out, b.String())
	}
}
