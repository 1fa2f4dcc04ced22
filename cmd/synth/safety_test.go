package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainNoOverwrite: synth train twice with the same -out is an error
// the second time that says how to resume or replace the checkpoint, and
// leaves it as it was; -force replaces it.
func TestTrainNoOverwrite(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	ck := filepath.Join(dir, "x.safetensors")
	mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "3", "-out", ck)...)
	before := fileBytes(t, ck)
	e, _ := testEnv()
	err := trainCmd(e, tinyTrain(dir, txt, "-steps", "2", "-out", ck))
	if err == nil || !strings.Contains(err.Error(), "-resume "+ck) || !strings.Contains(err.Error(), "-force") {
		t.Fatalf("second train: %v", err)
	}
	if !bytes.Equal(fileBytes(t, ck), before) {
		t.Fatal("the refused run changed the checkpoint")
	}
	out := mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "2", "-out", ck, "-force")...)
	if !strings.Contains(out, "saved step 2") {
		t.Errorf("-force:\n%s", out)
	}
}
