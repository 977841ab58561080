-- SQL script recorded for the evaluation suite's traces (sqlite3 CLI, a file database).
PRAGMA journal_mode = WAL;
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, grp INTEGER);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 150000)
INSERT INTO t SELECT x, printf('name-%08d-%x', x, (x * 2654435761) % 4294967296), x * 0.37, x % 97 FROM c;
CREATE INDEX t_name ON t(name);
CREATE INDEX t_grp ON t(grp, v);
SELECT grp, count(*), avg(v), max(name) FROM t GROUP BY grp ORDER BY 3 DESC LIMIT 3;
CREATE TABLE u AS SELECT grp, group_concat(name, ',') AS names FROM t GROUP BY grp;
SELECT count(*) FROM t JOIN u USING (grp) WHERE t.v > 1000 AND t.id % 7 = 0;
UPDATE t SET name = upper(name) WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT sum(length(names)) FROM u;
SELECT name FROM t WHERE name LIKE 'NAME-0001%' ORDER BY v DESC LIMIT 2;
VACUUM;
SELECT count(*), sum(v) FROM t;
