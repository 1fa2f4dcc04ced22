package synth

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestCSVLogColumns: a language model's log has five columns, a
// classifier's a sixth (val_accuracy, empty where not evaluated), and a
// classifier's log resumed in place that was written with five columns
// (before the accuracy column) keeps its rows and its five columns.
func TestCSVLogColumns(t *testing.T) {
	dir := t.TempDir()
	nan := math.NaN()
	rows := []csvRow{{0, nan, 2.5, nan, nan, 0.25}, {1, 2.75, nan, 0.001, 10, nan}, {2, 2.5, 2.25, 0.002, 12.5, 0.5}}
	for _, c := range []struct {
		name     string
		classify bool
		want     string
	}{
		{"lm", false, "step,loss,val_loss,lr,tokens_per_s\n0,,2.5,,\n1,2.75,,0.001,10\n2,2.5,2.25,0.002,12.5\n"},
		{"cls", true, "step,loss,val_loss,lr,tokens_per_s,val_accuracy\n0,,2.5,,,0.25\n1,2.75,,0.001,10,\n2,2.5,2.25,0.002,12.5,0.5\n"},
	} {
		p := filepath.Join(dir, c.name+".csv")
		l := newCSVLog(p, false, 0, c.classify)
		for _, r := range rows {
			l.row(r)
		}
		if err := l.flush(); err != nil {
			t.Fatal(err)
		}
		l.close()
		if b, _ := os.ReadFile(p); string(b) != c.want {
			t.Errorf("%s log:\n%s\nwant\n%s", c.name, b, c.want)
		}
		if !leftover(p, filepath.Join(dir, c.name+".safetensors")) {
			t.Errorf("%s log is not recognised as a run's log", c.name)
		}
		// Resumed in place from step 1: row 2 is replaced.
		l = newCSVLog(p, true, 1, c.classify)
		l.row(csvRow{2, 2.0, 1.75, 0.002, 11, 0.75})
		if err := l.flush(); err != nil {
			t.Fatal(err)
		}
		l.close()
		want := c.want[:len(c.want)-len("2,2.5,2.25,0.002,12.5\n")]
		if c.classify {
			want = c.want[:len(c.want)-len("2,2.5,2.25,0.002,12.5,0.5\n")] + "2,2,1.75,0.002,11,0.75\n"
		} else {
			want += "2,2,1.75,0.002,11\n"
		}
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s log resumed:\n%s\nwant\n%s", c.name, b, want)
		}
	}
	// A classifier resuming a five-column log keeps it.
	p := filepath.Join(dir, "old.csv")
	old := "step,loss,val_loss,lr,tokens_per_s\n0,,2.5,,\n1,2.75,,0.001,10\n2,2.5,2.25,0.002,12.5\n"
	if err := os.WriteFile(p, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	l := newCSVLog(p, true, 2, true)
	l.row(csvRow{3, 2.0, 1.75, 0.002, 11, 0.75})
	if err := l.flush(); err != nil {
		t.Fatal(err)
	}
	l.close()
	if b, _ := os.ReadFile(p); string(b) != old+"3,2,1.75,0.002,11\n" {
		t.Errorf("an older classifier's log resumed:\n%s", b)
	}
}
