package checkpoint

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"

	"github.com/synthgen/synthgen/runtime/model"
)

// KeyWeights is the optimizer-state metadata entry binding the state to
// its checkpoint: WeightsSum of the weights saved with it. It is in the
// optimizer-state file only (the checkpoint's metadata is the model
// card's "spec" and "step"). Files written before it existed lack it and
// are not checked against their checkpoint beyond the step.
const KeyWeights = "weights.sha256"

// KeyAdamSteps is the optimizer-state metadata entry holding AdamW's
// update count (its bias correction), at most the step: it is less after a
// resume from the weights alone, whose moments restarted from zero.
const KeyAdamSteps = "adam.steps"

// WeightsSum is the SHA-256 of m's parameters (every tensor's float32s,
// little-endian, in the model's parameter order), in hex: the identity of
// a checkpoint's weights.
func WeightsSum(m *model.Model) string {
	h := sha256.New()
	buf := make([]byte, 0, 1<<14)
	for _, p := range m.Params {
		h.Write([]byte(p.Name))
		for _, x := range p.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
			if len(buf) == cap(buf) {
				h.Write(buf)
				buf = buf[:0]
			}
		}
		h.Write(buf)
		buf = buf[:0]
	}
	return hex.EncodeToString(h.Sum(nil))
}

// weightsAlone is the advice that ends an error about an optimizer state
// that cannot be used.
func weightsAlone(opt string) string {
	return fmt.Sprintf("to resume from the weights alone (AdamW's moments restart from zero, so the run is not an exact continuation), move %s aside", opt)
}

// checkBinding checks the optimizer state's metadata meta (of file path)
// against the checkpoint's step and, when the state records it, the
// checksum of its weights (sum, "" to skip).
func checkBinding(path string, meta map[string]string, step int, sum string) error {
	as, err := strconv.Atoi(meta[KeyAdamSteps])
	if err != nil || as < 0 {
		return fmt.Errorf("%s: metadata %q = %q is not a non-negative integer", path, KeyAdamSteps, meta[KeyAdamSteps])
	}
	if as > step {
		return fmt.Errorf("%s: metadata %q = %d is past the checkpoint's step %d (the state of another run?); %s", path, KeyAdamSteps, as, step, weightsAlone(path))
	}
	if w, ok := meta[KeyWeights]; ok && sum != "" && w != sum {
		return fmt.Errorf("%s is the optimizer state of other weights than the checkpoint's (of another run at the same step, e.g. another seed: its %s differs); %s", path, KeyWeights, weightsAlone(path))
	}
	return nil
}
