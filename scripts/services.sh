#!/usr/bin/env bash
# Start the services the test suite talks to (Redis on 6379, PostgreSQL on 5432) when they are
# not running. Installs them with apt-get when missing and we are root. Never fails the build:
# the suite skips what it cannot reach, except under CI=true, where the tests require both.
set -u

have() { command -v "$1" >/dev/null 2>&1; }
apt_install() {
    if [ "$(id -u)" = 0 ] && have apt-get; then
        echo "services: installing $*"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@") >/dev/null 2>&1
    fi
}

redis_up() { have redis-cli && redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
if ! redis_up; then
    have redis-server || apt_install redis-server
    if have redis-server; then
        mkdir -p /tmp/specbench-redis
        redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
            --dir /tmp/specbench-redis --logfile /tmp/specbench-redis/redis.log
        for _ in $(seq 50); do redis_up && break; sleep 0.1; done
    fi
fi
redis_up && echo "services: redis up on 6379" || echo "services: redis NOT available"

pg_up() { have pg_isready && pg_isready -q -h 127.0.0.1 -p 5432; }
if ! pg_up; then
    have pg_ctlcluster || apt_install postgresql
    if have pg_ctlcluster && [ -d /etc/postgresql ]; then
        version=$(ls /etc/postgresql | sort -V | tail -n 1)
        pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 || true
        for _ in $(seq 100); do pg_up && break; sleep 0.1; done
    fi
fi
pg_up && echo "services: postgresql up on 5432" || echo "services: postgresql NOT available"
exit 0
