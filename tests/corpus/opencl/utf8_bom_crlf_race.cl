// Größe der Kachel: 8 — «lokal» (a UTF-8 comment after a BOM; CRLF line ends)
__kernel void utf8_tile(__global int *out)
{
    __local int tile[8]; /* ½ */
    int lid = get_local_id(0);
    tile[lid] = lid * 3;
    out[lid] = tile[(lid + 1) % 8];
}
