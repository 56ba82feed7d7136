package rmq

import "context"

// ListPrefix returns the schedules whose name starts with prefix, by name.
// Unlike List it reads the definitions and bodies of those schedules only:
// a service that keeps one tenant's schedules under a name prefix lists
// them without loading every other tenant's.
func (s *Schedules) ListPrefix(ctx context.Context, prefix string) ([]ScheduleInfo, error) {
	infos, err := s.m.ListPrefix(ctx, prefix)
	return convertAll(infos, err, scheduleInfo)
}

// Names returns the names of the schedules whose name starts with prefix
// ("" for all), unsorted, without reading their definitions or bodies.
func (s *Schedules) Names(ctx context.Context, prefix string) ([]string, error) {
	return s.m.Names(ctx, prefix)
}

// Exist reports which of names have a schedule, without reading their
// definitions or bodies.
func (s *Schedules) Exist(ctx context.Context, names ...string) ([]bool, error) {
	return s.m.Exist(ctx, names...)
}
