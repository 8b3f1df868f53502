"""Alerts: findings → routed, rate-limited, escalated Slack and email messages, delivered once."""
