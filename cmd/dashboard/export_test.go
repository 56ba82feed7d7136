package dashboard

// WithPageSize sets how many entries a listing page shows, so tests can page
// through small queues.
func WithPageSize(n int) Option { return func(c *config) { c.pageSize = n } }

// PauseAvailable says whether the library can pause topics (the Jobs API).
const PauseAvailable = pauseAvailable
