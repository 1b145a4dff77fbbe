package chaosrun

// Servers are where a started Env's servers answer, for a tool that runs
// processes of its own on them (paylab console).
type Servers struct {
	AdminURL string   // PostgreSQL superuser URL
	Brokers  []string // Kafka bootstrap servers
	SMTPAddr string   // Mailpit's SMTP listener
}

// Servers returns where the private servers of a started Env answer.
func (e *Env) Servers() Servers {
	return Servers{AdminURL: e.adminURL, Brokers: e.brokers, SMTPAddr: e.smtp}
}
