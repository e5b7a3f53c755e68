\i prep_lease.sql
EXECUTE lease('q',1,'{0}',ARRAY[gen_random_uuid()],'{60000}','{NULL}','{NULL}');
