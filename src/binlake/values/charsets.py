"""MySQL / MariaDB collation ids -> Python codecs (None = binary, keep bytes)."""

from __future__ import annotations

BINARY_COLLATION = 63

_RANGES: list[tuple[str, list[int | range]]] = [
    ("big5", [1, 84]),
    ("iso8859-2", [2, 9, 21, 27, 77]),
    ("latin-1", [3, 69, 5, 8, 15, 31, 47, 48, 49, 94, 6, 72, 10, 82]),
    ("cp850", [4, 80]),
    ("koi8-r", [7, 74]),
    ("ascii", [11, 65]),
    ("euc-jp", [12, 91, 97, 98]),
    ("shift_jis", [13, 88]),
    ("cp1251", [14, 23, 50, 51, 52]),
    ("iso8859-8", [16, 71]),
    ("cp874", [18, 89]),
    ("euc-kr", [19, 85]),
    ("koi8-u", [22, 75]),
    ("gb2312", [24, 86]),
    ("iso8859-7", [25, 70]),
    ("cp1250", [26, 34, 44, 66, 99]),
    ("gbk", [28, 87]),
    ("cp1257", [29, 58, 59]),
    ("iso8859-9", [30, 78]),
    ("utf-8", [33, 83, range(192, 216), 223, 76]),
    ("utf-16-be", [35, 90, range(128, 152), 159, 54, 55, range(101, 125)]),
    ("cp866", [36, 68]),
    ("mac-latin2", [38, 43]),
    ("mac-roman", [39, 53]),
    ("cp852", [40, 81]),
    ("iso8859-13", [20, 41, 42, 79]),
    ("cp1256", [57, 67]),
    ("cp932", [95, 96]),
    ("gb18030", [248, 249, 250]),
    ("utf-16-le", [56, 62]),
    ("utf-32-be", [60, 61, range(160, 184)]),
    ("utf-8", [45, 46, range(224, 248), range(255, 324)]),
]

COLLATION_CODECS: dict[int, str] = {}
for _codec, _ids in _RANGES:
    for _item in _ids:
        for _i in _item if isinstance(_item, range) else (_item,):
            COLLATION_CODECS[_i] = _codec


def codec_for(collation: int | None) -> str | None:
    """The codec of a collation; None for binary; 'utf-8' when unknown but textual."""
    if collation is None:
        return "?"
    if collation == BINARY_COLLATION:
        return None
    return COLLATION_CODECS.get(collation, "utf-8")


def decode_text(raw: bytes, codec: str | None) -> str | bytes:
    """Text by its codec; binary stays bytes; unknown charset: UTF-8 if valid, else the bytes."""
    if codec is None:
        return raw
    if codec == "?":
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    try:
        return raw.decode(codec)
    except UnicodeDecodeError:
        return raw
