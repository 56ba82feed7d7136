package rmq

import "context"

// ListPrefix returns the schedules whose name starts with prefix, by name.
// Unlike List it reads the definitions and bodies of those schedules only:
// a service that keeps one tenant's schedules under a name prefix lists
// them without loading every other tenant's.
func (s *Schedules) ListPrefix(ctx context.Context, prefix string) ([]ScheduleInfo, error) {
	if s.err != nil {
		return nil, s.err
	}
	names, err := s.store.Names(ctx, prefix)
	if err != nil {
		return nil, err
	}
	recs, now, err := s.store.ReadNames(ctx, names)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleInfo, 0, len(recs))
	for _, rec := range recs {
		info, err := scheduleInfo(rec, now)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Names returns the names of the schedules whose name starts with prefix
// ("" for all), unsorted, without reading their definitions or bodies.
func (s *Schedules) Names(ctx context.Context, prefix string) ([]string, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.store.Names(ctx, prefix)
}

// Exist reports which of names have a schedule, without reading their
// definitions or bodies.
func (s *Schedules) Exist(ctx context.Context, names ...string) ([]bool, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.store.Exist(ctx, names)
}
