package tiny

// Checkpoint is the file the example trains this size into.
const Checkpoint = "tiny.safetensors"
