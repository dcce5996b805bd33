package netproxy

import "context"

// Reasons the proxy gives itself for a refusal after an ask, when the
// Verdict gives none it can use.
const (
	// reasonRefused is a refusal's Reason when the Verdict has none.
	reasonRefused = "refused"
	// reasonTooLate is an Allow that came once the ask's context had
	// ended: the proxy closing, or the connection's TotalTimeout.
	reasonTooLate = "no answer in time"
)

// decide checks a request for host and port (check) and, for one the
// allow-list does not name, asks Config.Ask (ask): it returns the decision
// to dial, or the error to answer the client with. The lookup is bounded
// as any lookup of the session's is (opContext); the ask is not.
func (s *session) decide(host string, port int) (decision, error) {
	ctx, cancel := s.opContext()
	d, err := s.p.check(ctx, host, port)
	cancel()
	if err != nil || !d.unlisted {
		return d, err
	}
	return s.ask(d)
}

// ask asks Config.Ask about d, a host and port the allow-list does not
// name with the addresses an entry for them would allow, while the
// handler holds the client's connection (nothing reads or writes it
// meanwhile, so none of its deadlines can end it). It returns d to dial
// when the answer is Allow, given before the ask's context ended; any
// other answer is a *RefusalError with the Verdict's Reason in Asked.
//
// The context is the proxy's (ended by Close), with the session's end as
// its deadline when TotalTimeout is set: the idle timeout does not count
// while the user decides, and starts again once Ask returns. No lock is
// held: concurrent connections each make their own call.
func (s *session) ask(d decision) (decision, error) {
	p := s.p
	var ctx context.Context
	var cancel context.CancelFunc
	if s.total > 0 {
		ctx, cancel = context.WithDeadline(p.ctx, s.end)
	} else {
		ctx, cancel = context.WithCancel(p.ctx)
	}
	defer cancel()
	host := d.host.String()
	p.log.Debug("netproxy: asking", "host", host, "port", d.port)
	v := p.cfg.Ask(ctx, host, d.port)
	// The client was held, not idle: its idle time starts now.
	s.touch()
	switch {
	case v.Allow && ctx.Err() == nil:
		p.log.Info("netproxy: allowed by an ask", "host", host, "port", d.port)
		d.unlisted = false
		return d, nil
	case v.Allow:
		// Fail closed: the connection's time, or the proxy, ended first.
		v.Reason = reasonTooLate
	case v.Reason == "":
		v.Reason = reasonRefused
	}
	return d, &RefusalError{Host: host, Port: d.port, Asked: v.Reason}
}
