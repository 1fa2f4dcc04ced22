package synth

import "fmt"

// OptionError is the error for an option whose value breaks a rule, before
// the run starts: errors.As finds it, and a command-line program can name
// its own flag instead (Option is the option's function name).
type OptionError struct {
	Option string // the option: "StopAt", "EvalEvery", …
	Value  any    // the value given
	Rule   string // the rule it breaks: "must be ≥ 0", …
}

func (e *OptionError) Error() string { return fmt.Sprintf("%s(%v): %s", e.Option, e.Value, e.Rule) }

// optionNames maps the settings' keys (options.set) to the options' names.
var optionNames = map[string]string{
	"data": "Data", "out": "Out", "steps": "Steps", "lr-steps": "LRSteps", "batch": "Batch",
	"lr": "LR", "warmup": "Warmup", "clip": "Clip", "wd": "WeightDecay", "seed": "Seed",
	"stop-at": "StopAt", "workers": "Workers", "eval-every": "EvalEvery",
	"eval-windows": "EvalWindows", "save-every": "SaveEvery", "isa": "ISA",
	"valid": "Valid", "hold-out": "HoldOut", "precision": "Precision",
}

// optionErr is the OptionError of setting key (an options.set key).
func optionErr(key string, value any, rule string, args ...any) error {
	name := optionNames[key]
	if name == "" {
		name = key
	}
	return &OptionError{Option: name, Value: value, Rule: fmt.Sprintf(rule, args...)}
}
