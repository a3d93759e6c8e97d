#!/usr/bin/env python3
"""The server CPU of one request of the Tableau paper's section 7.4, measured:

    tools/measure-nginx-request-cost.py [--sizes 1 100 1024] [--seconds 10] [--files 256]

Section 7.4 serves, over HTTPS, "a small PHP 'application'" that "sends a randomly
selected file of a given size (1 KiB, 100 KiB, or 1 MiB)" from a data set in tmpfs,
with nginx. This sets that up on loopback with the machine's own nginx, php-fpm and
openssl (Debian: nginx-light, php-fpm; a self-signed RSA-2048 certificate), one nginx
worker and one PHP-FPM worker (the paper's VMs have one vCPU each), `--files` files of
each size in a tmpfs directory, and drives it with wrk (`-t1 -c10`, keep-alive: the TLS
handshake is paid once per connection, as under wrk2). It prints, per size, the
requests served and the CPU time (user + system, /proc/PID/stat) the nginx and PHP-FPM
workers spent per request, and the same for nginx sending the file itself (no PHP).
Only the server's own processes are counted: the client's, and kernel work accounted
to it or to softirq threads, are not. Every process it starts is stopped by its id
before it exits."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")

NGINX_CONF = """
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {root}/cert.pem;
        ssl_certificate_key {root}/key.pem;
        root {root}/www;
        location /static/ {{ alias {data}/; }}
        location ~ \\.php$ {{
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME {root}/www$fastcgi_script_name;
            fastcgi_pass unix:{root}/php.sock;
        }}
    }}
}}
"""

PHP_POOL = """
[global]
pid = {root}/php-fpm.pid
error_log = {root}/php-fpm.log
daemonize = no
[www]
listen = {root}/php.sock
listen.mode = 0666
pm = static
pm.max_children = 1
"""

# Picks one of the data set's files of the asked size at random and sends it.
PHP_APP = """<?php
$size = intval($_GET['kib']);
header('Content-Type: application/octet-stream');
readfile('{data}/' . $size . '/' . mt_rand(0, {files} - 1));
"""


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def wrk(url: str, seconds: int) -> int:
    out = subprocess.run(["wrk", "-t1", "-c10", f"-d{seconds}s", url], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"{url}: the server answered with errors:\n{out}")
    return int(re.search(r"(\d+) requests in", out).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 1024], help="file sizes, KiB")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--files", type=int, default=256)
    parser.add_argument("--port", type=int, default=18443)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="nginx-cost-")
    data = tempfile.mkdtemp(prefix="nginx-cost-data-", dir="/dev/shm")
    procs: list[subprocess.Popen] = []
    try:
        # nginx's workers run as an unprivileged user: they must read the tree.
        os.chmod(root, 0o755)
        os.chmod(data, 0o755)
        for kib in args.sizes:
            os.makedirs(f"{data}/{kib}")
            for i in range(args.files):
                with open(f"{data}/{kib}/{i}", "wb") as f:
                    f.write(os.urandom(kib * 1024))
                os.chmod(f"{data}/{kib}/{i}", 0o644)
        os.makedirs(f"{root}/www")
        with open(f"{root}/www/file.php", "w") as f:
            f.write(PHP_APP.format(data=data, files=args.files))
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-days", "1",
                        "-keyout", f"{root}/key.pem", "-out", f"{root}/cert.pem"], capture_output=True, check=True)
        with open(f"{root}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(root=root, data=data, port=args.port))
        with open(f"{root}/php-fpm.conf", "w") as f:
            f.write(PHP_POOL.format(root=root))
        procs.append(subprocess.Popen([shutil.which("php-fpm8.2") or "php-fpm", "-y", f"{root}/php-fpm.conf", "-R"]))
        procs.append(subprocess.Popen(["nginx", "-c", f"{root}/nginx.conf", "-e", f"{root}/error.log"]))
        time.sleep(2)
        workers = children(procs[1].pid) + children(procs[0].pid)
        base = f"https://127.0.0.1:{args.port}"
        print(f"{args.seconds} s per row, wrk -t1 -c10 over HTTPS on loopback; nginx and PHP-FPM workers' CPU")
        print("| file | served by | requests | requests/s | server CPU per request (us) |")
        print("|---|---|---|---|---|")
        for kib in args.sizes:
            for label, path in (("nginx + PHP", f"/file.php?kib={kib}"), ("nginx alone", f"/static/{kib}/0")):
                wrk(base + path, 1)  # warm-up: connections, opcache
                before = cpu_ticks(workers)
                served = wrk(base + path, args.seconds)
                spent = cpu_ticks(workers) - before
                print(f"| {kib} KiB | {label} | {served} | {served / args.seconds:.0f} | {spent / CLK_TCK / served * 1e6:.1f} |")
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGQUIT if p is procs[-1] else signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
