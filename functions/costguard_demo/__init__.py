"""The embedded-AWS demo: moto's HTTP server, a realistic ML fleet, real handlers."""
