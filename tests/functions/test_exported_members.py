import sandcrew.functions
from sandcrew.errors import UserError


def test_definition_error_belongs_to_the_product_hierarchy() -> None:
    assert issubclass(sandcrew.functions.FunctionDefinitionError, UserError)
