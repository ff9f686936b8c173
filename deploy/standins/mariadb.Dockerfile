# Stand-in for the official mariadb image of the same series: Debian's mariadb-server (10.11.x)
# behind an entrypoint honouring the official one's contract (docker-entrypoint.sh here).
FROM debian:bookworm-slim
# The official image's mysql user and group (999), so a data volume moves between the two.
RUN groupadd --system --gid 999 mysql \
 && useradd --system --uid 999 --gid mysql --home-dir /var/lib/mysql --no-create-home mysql \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      mariadb-server mariadb-client \
 && rm -rf /var/lib/apt/lists/* /var/lib/mysql \
 && mkdir -p /var/lib/mysql /run/mysqld /docker-entrypoint-initdb.d \
 && chown mysql:mysql /var/lib/mysql /run/mysqld
# Debian's server listens on 127.0.0.1 only; the official image listens everywhere.
RUN printf '[mariadbd]\nbind-address = 0.0.0.0\nskip-name-resolve\n' \
      > /etc/mysql/mariadb.conf.d/99-docker.cnf
COPY mariadb-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/mysql
EXPOSE 3306
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["mariadbd"]
