package wide

// Checkpoint is the file a program would train this size into.
const Checkpoint = "wide.safetensors"
