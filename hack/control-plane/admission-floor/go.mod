// The floor of a mutating admission webhook for benchmarks/bench_admission.py: a minimal AdmissionReview server
// in Go's standard library (no dependency), so that the API server's own cost of a webhook call and of applying
// its patch can be told apart from netaware's webhook server.
module netaware.local/admission-floor

go 1.24.0
